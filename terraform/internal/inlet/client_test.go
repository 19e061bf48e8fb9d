package inlet

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// server answers with the statuses given, one per request, and records what each request carried.
type server struct {
	mu       sync.Mutex
	statuses []int
	bodies   []string
	seen     []*http.Request
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.seen)
	s.seen = append(s.seen, r.Clone(context.Background()))
	w.Header().Set("ETag", `"v1"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(s.statuses[n])
	_, _ = io.WriteString(w, s.bodies[n])
}

func start(t *testing.T, statuses []int, bodies []string) (*Client, *server) {
	t.Helper()
	s := &server{statuses: statuses, bodies: bodies}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	c := New(ts.URL+"/", "key-1", 5*time.Second, "test")
	c.backoff = time.Millisecond
	return c, s
}

func TestCreateRetriesWithTheSameIdempotencyKey(t *testing.T) {
	c, s := start(t, []int{502, 503, 201}, []string{"", "", `{"id": "p1"}`})
	answer, err := c.Create(context.Background(), "/pipelines", map[string]any{"name": "p"})
	if err != nil {
		t.Fatal(err)
	}
	if string(answer.Body) != `{"id": "p1"}` || answer.ETag != `"v1"` {
		t.Fatalf("answer %s %s", answer.Body, answer.ETag)
	}
	if len(s.seen) != 3 {
		t.Fatalf("%d requests, want 3", len(s.seen))
	}
	key := s.seen[0].Header.Get("Idempotency-Key")
	if !strings.HasPrefix(key, "terraform-") {
		t.Fatalf("Idempotency-Key %q", key)
	}
	for _, r := range s.seen {
		if r.Header.Get("Idempotency-Key") != key || r.Header.Get("Authorization") != "Bearer key-1" {
			t.Fatalf("retry sent %v", r.Header)
		}
	}
}

func TestACreateStillInProgressIsAskedAgain(t *testing.T) {
	c, s := start(t, []int{409, 201}, []string{`{"title": "Conflict", "detail": "in progress"}`, `{"id": "k1"}`})
	if _, err := c.Create(context.Background(), "/api-keys", map[string]any{}); err != nil || len(s.seen) != 2 {
		t.Fatalf("err %v after %d requests", err, len(s.seen))
	}
}

func TestWritesUnderIfMatchAreNotRetried(t *testing.T) {
	c, s := start(t, []int{502, 502, 200}, []string{"", "", `{}`})
	if _, err := c.Put(context.Background(), "/pipelines/p1", map[string]any{}, `"v0"`); err == nil {
		t.Fatal("a 502 PUT succeeded")
	}
	if _, err := c.Post(context.Background(), "/webhooks/w1/rotate-secret", `"v0"`); err == nil {
		t.Fatal("a 502 rotation succeeded")
	}
	if len(s.seen) != 2 {
		t.Fatalf("%d requests, want one each", len(s.seen))
	}
}

func TestTwoCreatesHaveTwoKeys(t *testing.T) {
	c, s := start(t, []int{201, 201}, []string{`{}`, `{}`})
	for range 2 {
		if _, err := c.Create(context.Background(), "/webhooks", map[string]any{}); err != nil {
			t.Fatal(err)
		}
	}
	if s.seen[0].Header.Get("Idempotency-Key") == s.seen[1].Header.Get("Idempotency-Key") {
		t.Fatal("two creates shared one Idempotency-Key")
	}
}

func TestPatchIsNotRetried(t *testing.T) {
	c, s := start(t, []int{502, 200}, []string{"", `{}`})
	_, err := c.Patch(context.Background(), "/pipelines/p1/offsets", map[string]any{}, `"v0"`)
	var apiErr *Error
	if err == nil || len(s.seen) != 1 {
		t.Fatalf("err %v after %d requests, want one refused request", err, len(s.seen))
	}
	if apiErr, _ = err.(*Error); apiErr.Status != 502 || s.seen[0].Header.Get("If-Match") != `"v0"` {
		t.Fatalf("err %#v, If-Match %q", err, s.seen[0].Header.Get("If-Match"))
	}
}

func TestAProblemNamesItsFieldsAndAStaleETagSaysWhatToDo(t *testing.T) {
	c, _ := start(t, []int{422, 412}, []string{
		`{"title": "Invalid request", "detail": "The request is not valid", "errors": [{"field": "source.topics", "message": "too many"}]}`,
		`{"title": "Precondition Failed", "detail": "The pipeline changed."}`,
	})
	_, err := c.Put(context.Background(), "/pipelines/p1", map[string]any{}, `"v0"`)
	if err.Error() != "Inlet answered 422 Invalid request: The request is not valid (source.topics: too many)" {
		t.Fatalf("422 read as %q", err)
	}
	_, err = c.Put(context.Background(), "/pipelines/p1", map[string]any{}, `"v0"`)
	if !strings.Contains(err.Error(), "412") || !strings.Contains(err.Error(), "run plan again") {
		t.Fatalf("412 read as %q", err)
	}
}

func TestFindAndDeleteTakeAGoneObjectAsGone(t *testing.T) {
	c, _ := start(t, []int{404, 404}, []string{`{"title": "Not Found"}`, `{"title": "Not Found"}`})
	if answer, err := c.Find(context.Background(), "/connections/c1"); answer != nil || err != nil {
		t.Fatalf("Find: %v %v", answer, err)
	}
	if err := c.Delete(context.Background(), "/connections/c1", `"v1"`); err != nil {
		t.Fatalf("Delete: %v", err)
	}
}

func TestAnUnreachableInletIsNamed(t *testing.T) {
	c := New("http://127.0.0.1:1", "k", time.Second, "test")
	c.backoff = time.Millisecond
	_, err := c.Get(context.Background(), "/me", nil)
	if err == nil || !strings.Contains(err.Error(), "could not be reached at http://127.0.0.1:1") {
		t.Fatalf("err %v", err)
	}
}
