package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/acctest"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// A SASL connection to a broker nothing connects to: Inlet stores it and its secret without dialling.
const connectionBroker = "broker-1.example.com:9093"

// connectionSASLConfig is a SASL_SSL connection whose password is the sensitive sasl_password, a
// plaintext one to the sandbox Kafka, and both data source lookups of the first.
func connectionSASLConfig(name, password, clientID string) string {
	return fmt.Sprintf(`
resource "inlet_connection" "c" {
  name              = %[1]q
  bootstrap_servers = %[2]q
  security_protocol = "SASL_SSL"
  sasl_mechanism    = "SCRAM-SHA-512"
  sasl_username     = "ingest"
  sasl_password     = %[3]q
  options           = { "client.id" = %[4]q, "socket.keepalive.enable" = "true" }
}

resource "inlet_connection" "plain" {
  name              = "%[1]s-plain"
  bootstrap_servers = %[5]q
  options           = {}

  schema_registry_url      = "https://registry.example.com:8081"
  schema_registry_username = "reader"
  schema_registry_password = "registry-secret-31c7"
}

data "inlet_connection" "by_name" {
  name       = inlet_connection.c.name
  depends_on = [inlet_connection.c]
}

data "inlet_connection" "by_id" {
  id = inlet_connection.c.id
}
`, name, connectionBroker, password, clientID, os.Getenv("INLET_ACC_BOOTSTRAP"))
}

// apiConnection is the connection as Inlet shows it.
func apiConnection(t *testing.T, id string) map[string]any {
	t.Helper()
	answer, err := accClient(t).Get(context.Background(), "/connections/"+id, nil)
	if err != nil {
		t.Fatalf("GET /connections/%s: %v", id, err)
	}
	var body map[string]any
	if err := json.Unmarshal(answer.Body, &body); err != nil {
		t.Fatalf("GET /connections/%s: %v", id, err)
	}
	return body
}

// connectionVersion records the connection's credentials_version (state and Inlet must agree) in into.
func connectionVersion(t *testing.T, into *int64) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		r := s.RootModule().Resources["inlet_connection.c"].Primary
		inState, err := strconv.ParseInt(r.Attributes["credentials_version"], 10, 64)
		if err != nil {
			return fmt.Errorf("credentials_version in state: %w", err)
		}
		inInlet := apiConnection(t, r.ID)["credentials_version"]
		if inInlet != float64(inState) {
			return fmt.Errorf("credentials_version: %d in state, %v in Inlet", inState, inInlet)
		}
		*into = inState
		return nil
	}
}

// versionMoved checks that the credentials_version now is more than (grows) or the same as (!grows) before.
func versionMoved(t *testing.T, before *int64, grows bool) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		prior := *before
		var now int64
		if err := connectionVersion(t, &now)(s); err != nil {
			return err
		}
		if grows && now <= prior {
			return fmt.Errorf("credentials_version %d did not grow from %d", now, prior)
		}
		if !grows && now != prior {
			return fmt.Errorf("credentials_version moved from %d to %d", prior, now)
		}
		return nil
	}
}

// patchConnection changes the connection behind Terraform's back (a JSON Merge Patch).
func patchConnection(t *testing.T, id *string, patch map[string]any) func() {
	return func() {
		if _, err := accClient(t).Patch(context.Background(), "/connections/"+*id, patch, ""); err != nil {
			t.Fatalf("PATCH /connections/%s: %v", *id, err)
		}
	}
}

func connectionID(into *string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		*into = s.RootModule().Resources["inlet_connection.c"].Primary.ID
		return nil
	}
}

// stringIs is a knownvalue check against a string known only when the check runs.
type stringIs struct{ want *string }

func (c stringIs) CheckValue(v any) error {
	if v != *c.want {
		return fmt.Errorf("expected %q, got %v", *c.want, v)
	}
	return nil
}

func (c stringIs) String() string { return *c.want }

// rawStateCheck asserts on the whole state as `show -json` gives it.
type rawStateCheck struct {
	secret string
	held   bool
}

// stateHolds checks that secret is (held) or is not anywhere in the state.
func stateHolds(secret string, held bool) statecheck.StateCheck { return rawStateCheck{secret, held} }

func (c rawStateCheck) CheckState(_ context.Context, req statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	raw, err := json.Marshal(req.State)
	if err != nil {
		resp.Error = err
		return
	}
	if strings.Contains(string(raw), c.secret) != c.held {
		resp.Error = fmt.Errorf("the state holds %q: %v, expected %v", c.secret, !c.held, c.held)
	}
}

func connectionsGone(t *testing.T) func(*terraform.State) error {
	return func(s *terraform.State) error {
		for _, r := range s.RootModule().Resources {
			if r.Type != "inlet_connection" {
				continue
			}
			answer, err := accClient(t).Find(context.Background(), "/connections/"+r.Primary.ID)
			if err != nil {
				return err
			}
			if answer != nil {
				return fmt.Errorf("connection %s still exists", r.Primary.ID)
			}
		}
		return nil
	}
}

// words is a pattern matching text whose spaces the CLI may have wrapped into line breaks.
func words(text string) *regexp.Regexp {
	parts := strings.Fields(text)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(strings.Join(parts, `\s+`))
}

// TestAccConnection: create (with the data source's lookups), an update that keeps the secret, a
// rotation, drift through the API, and import (INLET_IMPORT_CREDENTIALS refused, an unknown id, by id).
func TestAccConnection(t *testing.T) {
	name := acctest.RandomWithPrefix("acc-conn")
	const first, second = "first-secret-4f1c", "second-secret-9a2e"
	var id string
	var version int64
	address := "inlet_connection.c"
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             connectionsGone(t),
		Steps: []resource.TestStep{
			{ // create; the default check after it: a second plan is empty
				Config: connectionSASLConfig(name, first, "terraform"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("security_protocol"), knownvalue.StringExact("SASL_SSL")),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("sasl_password"), knownvalue.StringExact(first)),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("credentials_status"), knownvalue.StringExact("ok")),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("ssl_endpoint_identification"), knownvalue.Null()),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("options"), knownvalue.MapExact(map[string]knownvalue.Check{
						"client.id": knownvalue.StringExact("terraform"), "socket.keepalive.enable": knownvalue.StringExact("true")})),
					statecheck.ExpectKnownValue("inlet_connection.plain", tfjsonpath.New("security_protocol"), knownvalue.StringExact("PLAINTEXT")),
					statecheck.ExpectKnownValue("inlet_connection.plain", tfjsonpath.New("options"), knownvalue.MapSizeExact(0)),
					statecheck.ExpectKnownValue("inlet_connection.plain", tfjsonpath.New("credentials_version"), knownvalue.NotNull()),
					statecheck.ExpectKnownValue("inlet_connection.plain", tfjsonpath.New("schema_registry_password"), knownvalue.StringExact("registry-secret-31c7")),
					statecheck.ExpectKnownValue("inlet_connection.plain", tfjsonpath.New("schema_registry_endpoint_identification"), knownvalue.Null()),
					stateHolds(first, true), // a sensitive argument is in state: what the write-only ones avoid
					statecheck.ExpectKnownValue("data.inlet_connection.by_name", tfjsonpath.New("has_credentials"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue("data.inlet_connection.by_name", tfjsonpath.New("sasl_mechanism"), knownvalue.StringExact("SCRAM-SHA-512")),
					statecheck.ExpectKnownValue("data.inlet_connection.by_name", tfjsonpath.New("schema_registry_url"), knownvalue.Null()),
					statecheck.ExpectKnownValue("data.inlet_connection.by_id", tfjsonpath.New("name"), knownvalue.StringExact(name)),
					statecheck.ExpectKnownValue("data.inlet_connection.by_id", tfjsonpath.New("options"), knownvalue.MapSizeExact(2)),
				},
				Check: resource.ComposeTestCheckFunc(
					connectionID(&id),
					connectionVersion(t, &version),
					resource.TestCheckResourceAttrPair("data.inlet_connection.by_name", "id", address, "id"),
					resource.TestCheckResourceAttrPair("data.inlet_connection.by_id", "credentials_version", address, "credentials_version"),
					resource.TestCheckResourceAttr("data.inlet_connection.by_id", "bootstrap_servers", connectionBroker),
					func(s *terraform.State) error {
						c := apiConnection(t, id)
						if c["has_credentials"] != true || c["sasl_mechanism"] != "SCRAM-SHA-512" || c["ssl"] != nil {
							return fmt.Errorf("Inlet holds %v", c)
						}
						plain := apiConnection(t, s.RootModule().Resources["inlet_connection.plain"].Primary.ID)
						if registry, _ := plain["schema_registry"].(map[string]any); registry["auth"] != "basic" {
							return fmt.Errorf("Inlet holds %v", plain)
						}
						return nil
					},
				),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{ // an update that touches no credential: the secret keeps its version
				Config: connectionSASLConfig(name, first, "terraform-2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
						plancheck.ExpectResourceAction("inlet_connection.plain", plancheck.ResourceActionNoop),
						plancheck.ExpectKnownValue(address, tfjsonpath.New("id"), stringIs{&id}),
						plancheck.ExpectUnknownValue(address, tfjsonpath.New("etag")),
						plancheck.ExpectUnknownValue(address, tfjsonpath.New("credentials_version")),
						plancheck.ExpectKnownValue("inlet_connection.plain", tfjsonpath.New("etag"), knownvalue.NotNull()),
					},
				},
				Check: resource.ComposeTestCheckFunc(
					versionMoved(t, &version, false),
					resource.TestCheckResourceAttr(address, "options.client.id", "terraform-2"),
					func(*terraform.State) error {
						if got := apiConnection(t, id)["options"].(map[string]any)["client.id"]; got != "terraform-2" {
							return fmt.Errorf("Inlet's client.id is %v", got)
						}
						return nil
					},
				),
			},
			{ // rotation: a new password is a new secret version of the same connection
				Config: connectionSASLConfig(name, second, "terraform-2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate)},
				},
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttrPtr(address, "id", &id),
					versionMoved(t, &version, true),
					connectionVersion(t, &version),
				),
				ConfigStateChecks: []statecheck.StateCheck{stateHolds(first, false)},
			},
			{ // drift through the API: other credentials and brokers; the plan sees it, apply puts it back
				PreConfig: patchConnection(t, &id, map[string]any{
					"bootstrap_servers": "broker-2.example.com:9093",
					"credentials":       map[string]any{"username": "someone", "password": "outside-secret"},
				}),
				Config: connectionSASLConfig(name, second, "terraform-2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue(address, tfjsonpath.New("bootstrap_servers"), knownvalue.StringExact(connectionBroker)),
						plancheck.ExpectKnownValue(address, tfjsonpath.New("sasl_username"), knownvalue.StringExact("ingest")),
					},
				},
				Check: resource.ComposeTestCheckFunc(
					versionMoved(t, &version, true),
					connectionVersion(t, &version),
					func(*terraform.State) error {
						if got := apiConnection(t, id)["bootstrap_servers"]; got != connectionBroker {
							return fmt.Errorf("Inlet's bootstrap_servers is %v", got)
						}
						return nil
					},
				),
			},
			{ // INLET_IMPORT_CREDENTIALS with a key that is not a secret is refused
				PreConfig:     func() { t.Setenv(importCredentialsEnv, `{"password": "x"}`) },
				ResourceName:  address,
				ImportState:   true,
				ImportStateId: "00000000-0000-0000-0000-000000000000",
				ExpectError:   words(importCredentialsEnv + " is not a JSON object of write-only attributes"),
			},
			{ // an id Inlet does not have
				PreConfig:     func() { t.Setenv(importCredentialsEnv, "") },
				ResourceName:  address,
				ImportState:   true,
				ImportStateId: "00000000-0000-0000-0000-000000000000",
				ExpectError:   words("No connection 00000000-0000-0000-0000-000000000000"),
			},
			{ // import by id, its secrets from INLET_IMPORT_CREDENTIALS: the same state as Terraform's
				PreConfig:         func() { t.Setenv(importCredentialsEnv, `{"sasl_username": "ingest", "sasl_password": "`+second+`"}`) },
				ResourceName:      address,
				ImportState:       true,
				ImportStateVerify: true,
			},
			{ // deleted through the API: planned for creation, and created again
				PreConfig: func() {
					if err := accClient(t).Delete(context.Background(), "/connections/"+id, ""); err != nil {
						t.Fatal(err)
					}
				},
				Config: connectionSASLConfig(name, second, "terraform-2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(address, plancheck.ResourceActionCreate)},
				},
				Check: connectionID(&id),
			},
		},
	})
}
