// Package inlet is Inlet's REST API as the provider uses it: bearer auth, ETags, Idempotency-Key and
// RFC 9457 problem details. Every failure is an *Error whose Detail is what Inlet said (with the
// fields it names), so Terraform shows the user Inlet's words, not a status code.
package inlet

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Statuses that mean "the request may not have been applied; the same request may be sent again".
var retryable = map[int]bool{http.StatusBadGateway: true, http.StatusServiceUnavailable: true, http.StatusGatewayTimeout: true}

// Error is a request Inlet refused, or one that never reached it (Status 0).
type Error struct {
	Status int
	Title  string
	Detail string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return e.Title
	}
	return e.Title + ": " + e.Detail
}

// IsNotFound says whether err is Inlet's 404: the object is gone, or is another tenant's.
func IsNotFound(err error) bool {
	var apiErr *Error
	return errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound
}

// Answer is a successful response: its JSON body (nil for 204) and its ETag.
type Answer struct {
	Body []byte
	ETag string
}

// Decode reads the body into v.
func (a *Answer) Decode(v any) error {
	if err := json.Unmarshal(a.Body, v); err != nil {
		return &Error{Title: "Inlet's answer could not be read", Detail: err.Error()}
	}
	return nil
}

// Client talks to one Inlet with one API key.
type Client struct {
	endpoint string
	apiKey   string
	agent    string
	http     *http.Client
	retries  int
	backoff  time.Duration
}

// New returns a client for endpoint (e.g. https://inlet.example.com) whose requests each take at most timeout.
func New(endpoint, apiKey string, timeout time.Duration, version string) *Client {
	return &Client{
		endpoint: strings.TrimRight(endpoint, "/"),
		apiKey:   apiKey,
		agent:    "terraform-provider-inlet/" + version,
		http:     &http.Client{Timeout: timeout},
		retries:  3,
		backoff:  500 * time.Millisecond,
	}
}

type request struct {
	method  string
	path    string
	query   url.Values
	body    any
	etag    string
	idemKey string
	// Only where sending it twice is harmless: reads, keyed creates, deletes. Not a write under
	// If-Match: were its answer lost, the retry would meet the moved ETag and be refused.
	retry bool
}

func (c *Client) send(ctx context.Context, r request) (*http.Response, []byte, error) {
	var payload []byte
	if r.body != nil {
		var err error
		if payload, err = json.Marshal(r.body); err != nil {
			return nil, nil, &Error{Title: "The request could not be written", Detail: err.Error()}
		}
	}
	target := c.endpoint + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	attempts := 1
	if r.retry {
		attempts += c.retries
	}
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, r.method, target, bytes.NewReader(payload))
		if err != nil {
			return nil, nil, &Error{Title: "The request could not be made", Detail: err.Error()}
		}
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
		req.Header.Set("User-Agent", c.agent)
		req.Header.Set("Accept", "application/json")
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if r.etag != "" {
			req.Header.Set("If-Match", r.etag)
		}
		if r.idemKey != "" {
			req.Header.Set("Idempotency-Key", r.idemKey)
		}
		resp, err := c.http.Do(req)
		var body []byte
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		last := attempt == attempts
		switch {
		case err != nil && last:
			return nil, nil, &Error{Title: "Inlet could not be reached at " + c.endpoint, Detail: err.Error()}
		case err == nil && (!again(r, resp.StatusCode) || last):
			return resp, body, nil
		}
		wait := c.backoff << (attempt - 1)
		if wait > 4*time.Second {
			wait = 4 * time.Second
		}
		select {
		case <-ctx.Done():
			return nil, nil, &Error{Title: "Cancelled while waiting to retry", Detail: ctx.Err().Error()}
		case <-time.After(wait):
		}
	}
}

// again says whether a request may be sent again after this status: a gateway's, or Inlet's 409 for
// a keyed create whose first attempt is still in progress (a timeout's usual aftermath).
func again(r request, status int) bool {
	return retryable[status] || (r.idemKey != "" && status == http.StatusConflict)
}

func (c *Client) answer(ctx context.Context, r request) (*Answer, error) {
	resp, body, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		return nil, problem(resp, body)
	}
	return &Answer{Body: body, ETag: resp.Header.Get("ETag")}, nil
}

type fieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

type problemBody struct {
	Title  string       `json:"title"`
	Detail string       `json:"detail"`
	Errors []fieldError `json:"errors"`
}

func problem(resp *http.Response, body []byte) *Error {
	var p problemBody
	_ = json.Unmarshal(body, &p) // a body that is not a problem leaves the status text
	title := p.Title
	if title == "" {
		title = http.StatusText(resp.StatusCode)
	}
	detail := p.Detail
	if len(p.Errors) > 0 {
		named := make([]string, 0, len(p.Errors))
		for _, e := range p.Errors {
			named = append(named, e.Field+": "+e.Message)
		}
		if detail == "" {
			detail = strings.Join(named, "; ")
		} else {
			detail += " (" + strings.Join(named, "; ") + ")"
		}
	}
	if resp.StatusCode == http.StatusPreconditionFailed {
		detail = strings.TrimSpace(detail + " The object changed since Terraform last read it: " +
			"run plan again to see the change, then apply.")
	}
	return &Error{Status: resp.StatusCode, Title: fmt.Sprintf("Inlet answered %d %s", resp.StatusCode, title), Detail: detail}
}

// Get reads path.
func (c *Client) Get(ctx context.Context, path string, query url.Values) (*Answer, error) {
	return c.answer(ctx, request{method: http.MethodGet, path: path, query: query, retry: true})
}

// Find reads path, with a nil answer (and no error) for an object that is gone or another tenant's.
func (c *Client) Find(ctx context.Context, path string) (*Answer, error) {
	a, err := c.Get(ctx, path, nil)
	if IsNotFound(err) {
		return nil, nil
	}
	return a, err
}

// Create POSTs body with a fresh Idempotency-Key that every retry of this one create reuses: an
// answer lost on its way back is replayed by Inlet, never turned into a second object.
func (c *Client) Create(ctx context.Context, path string, body any) (*Answer, error) {
	return c.answer(ctx, request{method: http.MethodPost, path: path, body: body, idemKey: "terraform-" + token(), retry: true})
}

// Put replaces path under If-Match.
func (c *Client) Put(ctx context.Context, path string, body any, etag string) (*Answer, error) {
	return c.answer(ctx, request{method: http.MethodPut, path: path, body: body, etag: etag})
}

// Patch changes path under If-Match. Not retried: a lost answer would be retried against a moved ETag and refused.
func (c *Client) Patch(ctx context.Context, path string, body any, etag string) (*Answer, error) {
	return c.answer(ctx, request{method: http.MethodPatch, path: path, body: body, etag: etag})
}

// Post sends an action without a body (rotate-secret), under If-Match when etag is given.
func (c *Client) Post(ctx context.Context, path string, etag string) (*Answer, error) {
	return c.answer(ctx, request{method: http.MethodPost, path: path, etag: etag})
}

// Delete removes path; an object already gone is no error.
func (c *Client) Delete(ctx context.Context, path string, etag string) error {
	_, err := c.DeleteAnswer(ctx, path, etag)
	if IsNotFound(err) {
		return nil
	}
	return err
}

// DeleteAnswer removes path and returns Inlet's answer (the offsets' reset answers with the rows it moved).
func (c *Client) DeleteAnswer(ctx context.Context, path string, etag string) (*Answer, error) {
	return c.answer(ctx, request{method: http.MethodDelete, path: path, etag: etag, retry: true})
}

func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
