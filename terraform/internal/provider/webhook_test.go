package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/acctest"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// Webhooks go to hooks.example.com: the harness's Inlet looks no name up when a webhook is written
// (INLET_EGRESS_LOOKUP_S=0) and sends no delivery (no worker runs), so nothing leaves loopback.
const webhookHost = "https://hooks.example.com/inlet/"

func webhookConfig(url, arguments string) string {
	return fmt.Sprintf(`
resource "inlet_webhook" "w" {
  url = %q
  %s
}
`, url, arguments)
}

// apiWebhook is the webhook of address as Inlet holds it.
func apiWebhook(t *testing.T, s *terraform.State, address string) map[string]any {
	t.Helper()
	return readThroughAPI(t, "/webhooks/"+s.RootModule().Resources[address].Primary.ID)
}

// expectWebhook checks what Inlet holds for the webhook: fields as given, events in any order.
func expectWebhook(t *testing.T, address string, want map[string]any) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		got := apiWebhook(t, s, address)
		for field, value := range want {
			held := got[field]
			if events, ok := held.([]any); ok {
				names := make([]string, 0, len(events))
				for _, e := range events {
					names = append(names, e.(string))
				}
				sort.Strings(names)
				held = names
			}
			if !reflect.DeepEqual(held, value) {
				return fmt.Errorf("Inlet holds %s %#v, want %#v", field, held, value)
			}
		}
		return nil
	}
}

func sortedStrings(values ...string) []string {
	out := append([]string(nil), values...)
	sort.Strings(out)
	return out
}

// webhooksAt is the tenant's webhooks whose URL starts with prefix.
func webhooksAt(t *testing.T, prefix string) []map[string]any {
	t.Helper()
	answer, err := accClient(t).Get(context.Background(), "/webhooks", url.Values{"limit": {"100"}})
	if err != nil {
		t.Fatalf("GET /webhooks: %v", err)
	}
	var page struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(answer.Body, &page); err != nil {
		t.Fatal(err)
	}
	var at []map[string]any
	for _, w := range page.Items {
		if strings.HasPrefix(w["url"].(string), prefix) {
			at = append(at, w)
		}
	}
	return at
}

func webhookDestroyed(t *testing.T, prefix string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		for _, r := range s.RootModule().Resources {
			if r.Type == "inlet_webhook" {
				if err := goneFromInlet(t, "/webhooks/"+r.Primary.ID); err != nil {
					return err
				}
			}
		}
		if left := webhooksAt(t, prefix); len(left) > 0 {
			return fmt.Errorf("webhooks left at %s: %v", prefix, left)
		}
		return nil
	}
}

func TestAccWebhook(t *testing.T) {
	name := acctest.RandomWithPrefix("acc-webhook")
	hook := webhookHost + name
	const address = "inlet_webhook.w"
	var firstSecret, secret, id string
	keep := func(into *string) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			*into = s.RootModule().Resources[address].Primary.Attributes["secret"]
			return nil
		}
	}
	sameSecret := func(s *terraform.State) error {
		if got := s.RootModule().Resources[address].Primary.Attributes["secret"]; got != secret {
			return fmt.Errorf("the secret in state moved without a rotation")
		}
		return nil
	}
	changed := `
  description    = "changed"
  enabled        = false
  secret_version = 1
`
	rotated := `
  description    = "changed"
  enabled        = false
  secret_version = 2
`
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             webhookDestroyed(t, hook),
		Steps: []resource.TestStep{
			{
				Config: webhookConfig(hook, `
  events         = ["run.failed", "pipeline.lag_exceeded"]
  description    = "acceptance"
  secret_version = 1
`),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestMatchResourceAttr(address, "secret", regexp.MustCompile(`^whsec_.{20,}`)),
					resource.TestCheckNoResourceAttr(address, "secret_rotated_at"),
					resource.TestCheckResourceAttrSet(address, "created_at"),
					resource.TestCheckResourceAttrSet(address, "etag"),
					resource.TestCheckResourceAttr(address, "enabled", "true"),
					expectWebhook(t, address, map[string]any{
						"url": hook, "events": sortedStrings("run.failed", "pipeline.lag_exceeded"),
						"description": "acceptance", "enabled": true,
					}),
					keep(&firstSecret), keep(&secret),
					func(s *terraform.State) error {
						id = s.RootModule().Resources[address].Primary.ID
						return nil
					},
				),
			},
			{
				// events left out: Inlet's default set; the secret and the times stay as they were
				Config: webhookConfig(hook+"/v2", changed),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(address, tfjsonpath.New("secret_rotated_at"), knownvalue.Null()),
					plancheck.ExpectKnownValue(address, tfjsonpath.New("created_at"), knownvalue.NotNull()),
					plancheck.ExpectKnownValue(address, tfjsonpath.New("id"), knownvalue.NotNull()),
					plancheck.ExpectUnknownValue(address, tfjsonpath.New("etag")),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(address, "events.#", "7"),
					sameSecret,
					expectWebhook(t, address, map[string]any{
						"url": hook + "/v2", "events": sortedStrings(webhookDefaultEvents...),
						"description": "changed", "enabled": false, "secret_rotated_at": nil,
					}),
				),
			},
			{
				// a new secret_version rotates the secret, and the new one lands in state
				Config: webhookConfig(hook+"/v2", rotated),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue(address, tfjsonpath.New("secret")),
					plancheck.ExpectUnknownValue(address, tfjsonpath.New("secret_rotated_at")),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestMatchResourceAttr(address, "secret", regexp.MustCompile(`^whsec_.{20,}`)),
					resource.TestCheckResourceAttrSet(address, "secret_rotated_at"),
					func(s *terraform.State) error {
						if s.RootModule().Resources[address].Primary.Attributes["secret"] == firstSecret {
							return fmt.Errorf("the secret was not rotated")
						}
						if apiWebhook(t, s, address)["secret_rotated_at"] == nil {
							return fmt.Errorf("Inlet has no rotation")
						}
						return nil
					},
					keep(&secret),
				),
			},
			{
				// changed through the API: the plan sees it and the apply puts it back
				PreConfig: func() {
					patchWebhook(t, id, `{"description": "changed outside", "enabled": true, "events": ["run.failed"]}`)
				},
				Config: webhookConfig(hook+"/v2", rotated),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					sameSecret,
					expectWebhook(t, address, map[string]any{
						"events": sortedStrings(webhookDefaultEvents...), "description": "changed", "enabled": false,
					}),
				),
			},
			{
				// deleted through the API: created again
				PreConfig: func() {
					if err := accClient(t).Delete(context.Background(), "/webhooks/"+id, ""); err != nil {
						t.Fatalf("deleting the webhook: %v", err)
					}
				},
				Config: webhookConfig(hook+"/v2", rotated),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionCreate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestMatchResourceAttr(address, "secret", regexp.MustCompile(`^whsec_`)),
					func(s *terraform.State) error {
						if s.RootModule().Resources[address].Primary.ID == id {
							return fmt.Errorf("the webhook kept its old id")
						}
						return nil
					},
					expectWebhook(t, address, map[string]any{"url": hook + "/v2", "enabled": false}),
				),
			},
			{
				ResourceName:            address,
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"secret", "secret_version"},
			},
			{
				// Inlet refuses a private address: its words reach the user, and nothing changes
				Config:      webhookConfig("http://10.1.2.3/inlet", rotated),
				ExpectError: regexp.MustCompile(`Changing the webhook: Inlet answered 422`),
			},
			{
				Config:      webhookConfig(hook, `events = ["run.failed", "run.exploded"]`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`Attribute events\[Value\("run\.exploded"\)\]`),
			},
			{
				Config:      webhookConfig(hook, `events = []`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`Attribute events set must contain at least 1`),
			},
			{
				Config:      webhookConfig("ftp://hooks.example.com/inlet", ""),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`Attribute url must be an http:// or https://`),
			},
			{
				// nothing changed meanwhile: the plan of the last good configuration is empty
				Config:   webhookConfig(hook+"/v2", rotated),
				PlanOnly: true,
			},
		},
	})
}

// patchWebhook changes the webhook behind Terraform's back.
func patchWebhook(t *testing.T, id, body string) {
	t.Helper()
	if _, err := accClient(t).Patch(context.Background(), "/webhooks/"+id, json.RawMessage(body), ""); err != nil {
		t.Fatalf("PATCH /webhooks/%s: %v", id, err)
	}
}

func TestAccWebhookLostAnswer(t *testing.T) {
	hook := webhookHost + acctest.RandomWithPrefix("acc-webhook-lost")
	endpoint, dropped := lostAnswerProxy(t, http.MethodPost, "/webhooks")
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             webhookDestroyed(t, hook),
		Steps: []resource.TestStep{
			{
				// the replayed answer has no secret: the provider rotates it to have one
				Config: providerAt(endpoint) + webhookConfig(hook, ""),
				Check: resource.ComposeAggregateTestCheckFunc(
					func(*terraform.State) error {
						if !dropped.Load() {
							return fmt.Errorf("the proxy lost no answer")
						}
						if n := len(webhooksAt(t, hook)); n != 1 {
							return fmt.Errorf("want one webhook at %s, Inlet holds %d", hook, n)
						}
						return nil
					},
					resource.TestMatchResourceAttr("inlet_webhook.w", "secret", regexp.MustCompile(`^whsec_.{20,}`)),
					resource.TestCheckResourceAttrSet("inlet_webhook.w", "secret_rotated_at"),
				),
			},
		},
	})
}

// TestAccWebhookImportByIdentityWriteOnly imports a webhook and an API key by their resource
// identity on CLIs that have identities (OpenTofu 1.12), and by an import block's id on the others.
func TestAccWebhookImportByIdentityWriteOnly(t *testing.T) {
	name := acctest.RandomWithPrefix("acc-identity")
	hook := webhookHost + name
	config := webhookConfig(hook, `description = "imported"`) + apiKeyConfig(name, "viewer")
	kind := resource.ImportBlockWithID
	if os.Getenv("INLET_ACC_CLI_WRITE_ONLY") != "" {
		kind = resource.ImportBlockWithResourceIdentity
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             webhookDestroyed(t, hook),
		Steps: []resource.TestStep{
			{Config: config},
			{Config: config, ResourceName: "inlet_webhook.w", ImportState: true, ImportStateKind: kind},
			{Config: config, ResourceName: "inlet_api_key.k", ImportState: true, ImportStateKind: kind},
		},
	})
}
