package provider

import (
	"fmt"
	"os"
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

// connectionWriteOnlyConfig is a SASL_SSL connection whose password is write-only.
func connectionWriteOnlyConfig(name, password string, version int) string {
	return fmt.Sprintf(`
resource "inlet_connection" "c" {
  name                   = %[1]q
  bootstrap_servers      = %[2]q
  security_protocol      = "SASL_SSL"
  sasl_mechanism         = "SCRAM-SHA-512"
  sasl_username          = "ingest"
  sasl_password_wo       = %[3]q
  credentials_wo_version = %[4]d

  schema_registry_url      = "https://registry.example.com:8081"
  schema_registry_token_wo = %[5]q
}
`, name, connectionBroker, password, version, connectionRegistryToken)
}

// connectionRegistryToken is the write-only registry token of connectionWriteOnlyConfig.
const connectionRegistryToken = "wo-registry-token-5e2d"

// TestAccConnectionWriteOnly: on a CLI with write-only arguments, the password is never in state and
// credentials_wo_version asks for its rotation; on one without, the configuration is refused plainly.
func TestAccConnectionWriteOnly(t *testing.T) {
	name := acctest.RandomWithPrefix("acc-conn-wo")
	const first, second, third = "wo-secret-one-77d1", "wo-secret-two-1b8e", "wo-secret-three-c03a"
	address := "inlet_connection.c"
	if os.Getenv("INLET_ACC_CLI_WRITE_ONLY") == "" {
		resource.Test(t, resource.TestCase{
			PreCheck:                 func() { accPreCheck(t) },
			ProtoV6ProviderFactories: testProviders,
			Steps: []resource.TestStep{{
				Config:   connectionWriteOnlyConfig(name, first, 1),
				PlanOnly: true,
				ExpectError: words("sasl_password_wo is write-only, which needs OpenTofu 1.11+ or Terraform 1.11+. " +
					"On this CLI give sasl_password instead"),
			}},
		})
		return
	}
	var id string
	var version int64
	noSecret := func(secrets ...string) []statecheck.StateCheck {
		checks := []statecheck.StateCheck{
			statecheck.ExpectKnownValue(address, tfjsonpath.New("sasl_password"), knownvalue.Null()),
			statecheck.ExpectKnownValue(address, tfjsonpath.New("sasl_password_wo"), knownvalue.Null()),
			statecheck.ExpectIdentityValueMatchesState(address, tfjsonpath.New("id")),
		}
		for _, s := range secrets {
			checks = append(checks, stateHolds(s, false))
		}
		return checks
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             connectionsGone(t),
		Steps: []resource.TestStep{
			{ // a write-only argument and its sensitive twin together are refused
				Config: strings.Replace(connectionWriteOnlyConfig(name, first, 1), "sasl_username", `sasl_password = "p"
  sasl_username`, 1),
				PlanOnly:    true,
				ExpectError: words(`Attribute "sasl_password" cannot be specified when "sasl_password_wo" is specified`),
			},
			{ // and so is one without credentials_wo_version
				Config:      strings.Replace(connectionWriteOnlyConfig(name, first, 1), "credentials_wo_version = 1", "", 1),
				PlanOnly:    true,
				ExpectError: words(`Attribute "credentials_wo_version" must be specified when "sasl_password_wo" is specified`),
			},
			{ // create: Inlet has the password, the state does not
				Config:            connectionWriteOnlyConfig(name, first, 1),
				ConfigStateChecks: append(noSecret(first, connectionRegistryToken), statecheck.ExpectKnownValue(address, tfjsonpath.New("credentials_wo_version"), knownvalue.Int64Exact(1))),
				Check: resource.ComposeTestCheckFunc(
					connectionID(&id),
					connectionVersion(t, &version),
					resource.TestCheckNoResourceAttr(address, "sasl_password_wo"),
					resource.TestCheckNoResourceAttr(address, "sasl_password"),
					func(*terraform.State) error {
						c := apiConnection(t, id)
						registry, _ := c["schema_registry"].(map[string]any)
						if c["has_credentials"] != true || c["credentials_status"] != "ok" || registry["auth"] != "bearer" {
							return fmt.Errorf("Inlet holds %v", c)
						}
						return nil
					},
				),
			},
			{ // a new write-only value alone is not seen: nothing to do, the secret keeps its version
				Config: connectionWriteOnlyConfig(name, second, 1),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: versionMoved(t, &version, false),
			},
			{ // with a new credentials_wo_version it is sent: a rotation
				Config: connectionWriteOnlyConfig(name, second, 2),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
						plancheck.ExpectUnknownValue(address, tfjsonpath.New("credentials_version")),
					},
				},
				ConfigStateChecks: noSecret(first, second, connectionRegistryToken),
				Check:             resource.ComposeTestCheckFunc(versionMoved(t, &version, true), connectionVersion(t, &version)),
			},
			{ // a rotation outside Terraform is drift: the plan sends the configured password again
				PreConfig: patchConnection(t, &id, map[string]any{
					"credentials": map[string]any{"username": "ingest", "password": third},
				}),
				Config: connectionWriteOnlyConfig(name, second, 2),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue(address, tfjsonpath.New("credentials_wo_version"), knownvalue.Int64Exact(2)),
					},
				},
				ConfigStateChecks: append(noSecret(first, second, third),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("credentials_wo_version"), knownvalue.Int64Exact(2))),
				Check: resource.ComposeTestCheckFunc(versionMoved(t, &version, true), connectionVersion(t, &version)),
			},
			{ // import by identity (an import block), credentials_wo_version from INLET_IMPORT_CREDENTIALS: nothing to do
				PreConfig:       func() { t.Setenv(importCredentialsEnv, `{"sasl_username": "ingest", "credentials_wo_version": 2}`) },
				Config:          connectionWriteOnlyConfig(name, second, 2),
				ResourceName:    address,
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithResourceIdentity,
			},
		},
	})
}
