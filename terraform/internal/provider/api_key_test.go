package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/acctest"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"inlet.dev/terraform-provider-inlet/internal/inlet"
)

func apiKeyConfig(name, role string) string {
	return fmt.Sprintf(`
resource "inlet_api_key" "k" {
  name = %q
  role = %q
}
`, name, role)
}

// readThroughAPI is path as Inlet answers it to the harness's admin key.
func readThroughAPI(t *testing.T, path string) map[string]any {
	t.Helper()
	answer, err := accClient(t).Get(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	var body map[string]any
	if err := json.Unmarshal(answer.Body, &body); err != nil {
		t.Fatal(err)
	}
	return body
}

// goneFromInlet says that Inlet answers 404 for path.
func goneFromInlet(t *testing.T, path string) error {
	t.Helper()
	_, err := accClient(t).Get(context.Background(), path, nil)
	if err == nil {
		return fmt.Errorf("%s still exists", path)
	}
	if !inlet.IsNotFound(err) {
		return fmt.Errorf("GET %s: %v", path, err)
	}
	return nil
}

// callerOf is what Inlet says of the caller holding key (GET /me), or the error it answers.
func callerOf(t *testing.T, key string) (map[string]any, error) {
	t.Helper()
	answer, err := inlet.New(accEnv(t, "INLET_ENDPOINT"), key, 30*time.Second, "acceptance").Get(context.Background(), "/me", nil)
	if err != nil {
		return nil, err
	}
	var me map[string]any
	return me, json.Unmarshal(answer.Body, &me)
}

// keyWorks checks that the key in state is a live key of its id and role.
func keyWorks(t *testing.T, address string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		attrs := s.RootModule().Resources[address].Primary.Attributes
		if !strings.HasPrefix(attrs["key"], attrs["prefix"]) {
			return fmt.Errorf("the key does not start with its prefix %q", attrs["prefix"])
		}
		me, err := callerOf(t, attrs["key"])
		if err != nil {
			return fmt.Errorf("the key in state is refused: %v", err)
		}
		if me["key_id"] != attrs["id"] || me["role"] != attrs["role"] {
			return fmt.Errorf("Inlet says the key is %v, state says id %s role %s", me, attrs["id"], attrs["role"])
		}
		return nil
	}
}

// keyRevoked checks that Inlet holds the key as revoked and refuses it.
func keyRevoked(t *testing.T, id, key string) error {
	if got := readThroughAPI(t, "/api-keys/"+id)["revoked_at"]; got == nil {
		return fmt.Errorf("API key %s is not revoked", id)
	}
	if key == "" {
		return nil
	}
	if _, err := callerOf(t, key); err == nil {
		return fmt.Errorf("API key %s still works", id)
	}
	return nil
}

// keysNamed is the tenant's keys of this name, revoked ones included.
func keysNamed(t *testing.T, name string) []map[string]any {
	t.Helper()
	answer, err := accClient(t).Get(context.Background(), "/api-keys", url.Values{"limit": {"100"}, "sort": {"-created_at"}})
	if err != nil {
		t.Fatalf("GET /api-keys: %v", err)
	}
	var page struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(answer.Body, &page); err != nil {
		t.Fatal(err)
	}
	var named []map[string]any
	for _, k := range page.Items {
		if k["name"] == name {
			named = append(named, k)
		}
	}
	return named
}

func TestAccAPIKey(t *testing.T) {
	name := acctest.RandomWithPrefix("acc-key")
	const address = "inlet_api_key.k"
	var issued []string        // every key id the test saw, all revoked at the end
	var lastID, lastKey string // the key in state after the previous step
	remember := func(s *terraform.State) error {
		attrs := s.RootModule().Resources[address].Primary.Attributes
		if attrs["id"] == lastID {
			return fmt.Errorf("the key id %s did not change", lastID)
		}
		lastID, lastKey = attrs["id"], attrs["key"]
		issued = append(issued, lastID)
		return nil
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy: func(s *terraform.State) error {
			for _, id := range issued {
				if err := keyRevoked(t, id, ""); err != nil {
					return err
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: apiKeyConfig(name, "viewer"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(address, "name", name),
					resource.TestCheckResourceAttr(address, "role", "viewer"),
					resource.TestMatchResourceAttr(address, "key", regexp.MustCompile(`^.{20,}$`)),
					resource.TestCheckResourceAttrSet(address, "prefix"),
					resource.TestCheckResourceAttrSet(address, "created_at"),
					keyWorks(t, address),
					remember,
				),
			},
			{
				// a key's role cannot change: a new key replaces it, and the old one is revoked
				Config: apiKeyConfig(name, "editor"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionReplace),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					func(*terraform.State) error { return keyRevoked(t, lastID, lastKey) },
					remember,
					resource.TestCheckResourceAttr(address, "role", "editor"),
					keyWorks(t, address),
				),
			},
			{
				// revoked outside Terraform: gone from state, and the apply issues another
				PreConfig: func() {
					if err := accClient(t).Delete(context.Background(), "/api-keys/"+lastID, ""); err != nil {
						t.Fatalf("revoking the key: %v", err)
					}
				},
				Config: apiKeyConfig(name, "editor"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionCreate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(remember, keyWorks(t, address)),
			},
			{
				ResourceName:            address,
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"key"},
				ImportStateCheck: func(states []*terraform.InstanceState) error {
					if key, ok := states[0].Attributes["key"]; ok && key != "" {
						return fmt.Errorf("an imported key holds a key")
					}
					return nil
				},
			},
			{
				Config:      apiKeyConfig(name, "owner"),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`Attribute role value must be one of`),
			},
			{
				Config:      apiKeyConfig("-"+name+"!", "viewer"),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`Attribute name must start with a letter or digit`),
			},
			{
				// nothing changed meanwhile: the plan of the last good configuration is empty
				Config:   apiKeyConfig(name, "editor"),
				PlanOnly: true,
			},
		},
	})
}

// lostAnswerProxy stands between the provider and the harness's Inlet (both on loopback): the first
// request of method to path reaches Inlet, but its answer is replaced by a 502, as a proxy timing out
// would do. The client sends it again with the same Idempotency-Key, and Inlet replays its answer.
func lostAnswerProxy(t *testing.T, method, path string) (endpoint string, dropped *atomic.Bool) {
	t.Helper()
	target, err := url.Parse(accEnv(t, "INLET_ENDPOINT"))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	dropped = new(atomic.Bool)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == method && r.URL.Path == path && dropped.CompareAndSwap(false, true) {
			lost := httptest.NewRecorder()
			proxy.ServeHTTP(lost, r)
			if lost.Code >= 300 {
				t.Errorf("Inlet refused the request whose answer was to be lost: %d %s", lost.Code, lost.Body)
			}
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(server.Close)
	return server.URL, dropped
}

// providerAt is a provider block sending to endpoint (with the key of INLET_API_KEY).
func providerAt(endpoint string) string {
	return fmt.Sprintf(`
provider "inlet" {
  endpoint = %q
}
`, endpoint)
}

func TestAccAPIKeyLostAnswer(t *testing.T) {
	name := acctest.RandomWithPrefix("acc-key-lost")
	endpoint, dropped := lostAnswerProxy(t, http.MethodPost, "/api-keys")
	config := providerAt(endpoint) + apiKeyConfig(name, "viewer")
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy: func(*terraform.State) error {
			for _, k := range keysNamed(t, name) {
				if k["revoked_at"] == nil {
					return fmt.Errorf("API key %v is not revoked", k["id"])
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				// the replayed answer has no key: the key no one holds is revoked, and the apply fails
				Config:      config,
				ExpectError: regexp.MustCompile(`The new API key was lost on its way back`),
			},
			{
				PreConfig: func() {
					if !dropped.Load() {
						t.Fatal("the proxy lost no answer")
					}
					keys := keysNamed(t, name)
					if len(keys) != 1 || keys[0]["revoked_at"] == nil {
						t.Fatalf("want the one key issued, revoked; Inlet holds %v", keys)
					}
				},
				Config: config,
				Check: resource.ComposeAggregateTestCheckFunc(
					keyWorks(t, "inlet_api_key.k"),
					func(*terraform.State) error {
						if n := len(keysNamed(t, name)); n != 2 {
							return fmt.Errorf("want 2 keys named %s, Inlet holds %d", name, n)
						}
						return nil
					},
				),
			},
		},
	})
}
