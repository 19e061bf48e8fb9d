package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/acctest"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// lagAlertConfig is a connection, two paused pipelines p and q reading INLET_ACC_TOPIC, and alert (a
// lag alert's resource block, or nothing).
func lagAlertConfig(name, bootstrap, topic, alert string) string {
	return fmt.Sprintf(`
resource "inlet_connection" "c" {
  name              = %[1]q
  bootstrap_servers = %[2]q
}

resource "inlet_pipeline" "p" {
  name   = %[1]q
  state  = "paused"
  source = { connection_id = inlet_connection.c.id, topics = [%[3]q] }
  target = { delta = { path = "bronze/%[1]s" } }
}

resource "inlet_pipeline" "q" {
  name   = "%[1]s-q"
  state  = "paused"
  source = { connection_id = inlet_connection.c.id, topics = [%[3]q] }
  target = { delta = { path = "bronze/%[1]s-q" } }
}
%[4]s
`, name, bootstrap, topic, alert)
}

func lagAlertBlock(pipeline, arguments string) string {
	return fmt.Sprintf(`
resource "inlet_lag_alert" "a" {
  pipeline_id = inlet_pipeline.%s.id
  %s
}
`, pipeline, arguments)
}

func pipelineIDOf(s *terraform.State, address string) string {
	return s.RootModule().Resources[address].Primary.ID
}

// expectLagAlert checks the thresholds Inlet holds for the pipeline's alert.
func expectLagAlert(t *testing.T, pipeline string, records int, age any) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		got := readThroughAPI(t, lagAlertPath(pipelineIDOf(s, pipeline)))
		want := map[string]any{"lag_records": float64(records), "lag_age_s": age}
		held := map[string]any{"lag_records": got["lag_records"], "lag_age_s": got["lag_age_s"]}
		if !reflect.DeepEqual(held, want) {
			return fmt.Errorf("Inlet holds %v, want %v", held, want)
		}
		return nil
	}
}

func noLagAlert(t *testing.T, pipeline string) resource.TestCheckFunc {
	return func(s *terraform.State) error { return goneFromInlet(t, lagAlertPath(pipelineIDOf(s, pipeline))) }
}

// putLagAlert sets the pipeline's alert behind Terraform's back.
func putLagAlert(t *testing.T, pipelineID, body string) {
	t.Helper()
	if _, err := accClient(t).Put(context.Background(), lagAlertPath(pipelineID), json.RawMessage(body), ""); err != nil {
		t.Fatalf("PUT lag alert: %v", err)
	}
}

func TestAccLagAlert(t *testing.T) {
	name := acctest.RandomWithPrefix("acc-lag")
	bootstrap, topic := accEnv(t, "INLET_ACC_BOOTSTRAP"), accEnv(t, "INLET_ACC_TOPIC")
	config := func(alert string) string { return lagAlertConfig(name, bootstrap, topic, alert) }
	const address = "inlet_lag_alert.a"
	var pipelines []string // every pipeline's id, whose alerts are gone at the end
	var onP string
	thresholds := `
  lag_records = 5000
  lag_age_s   = 600
  freshness_s = 5
`
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy: func(*terraform.State) error {
			for _, id := range pipelines {
				if err := goneFromInlet(t, lagAlertPath(id)); err != nil {
					return err
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: config(lagAlertBlock("p", "lag_records = 1000")),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrPair(address, "id", "inlet_pipeline.p", "id"),
					resource.TestCheckResourceAttrPair(address, "pipeline_id", "inlet_pipeline.p", "id"),
					resource.TestCheckResourceAttr(address, "lag_records", "1000"),
					resource.TestCheckNoResourceAttr(address, "lag_age_s"),
					resource.TestCheckResourceAttr(address, "status", "ok"),
					resource.TestCheckNoResourceAttr(address, "raised_at"),
					resource.TestCheckNoResourceAttr(address, "observed_lag"),
					resource.TestCheckResourceAttrSet(address, "etag"),
					expectLagAlert(t, "inlet_pipeline.p", 1000, nil),
					noLagAlert(t, "inlet_pipeline.q"),
					func(s *terraform.State) error {
						onP = pipelineIDOf(s, "inlet_pipeline.p")
						pipelines = append(pipelines, onP, pipelineIDOf(s, "inlet_pipeline.q"))
						return nil
					},
				),
			},
			{
				Config: config(lagAlertBlock("p", thresholds)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(address, tfjsonpath.New("id"), knownvalue.NotNull()),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(address, "lag_age_s", "600"),
					resource.TestCheckResourceAttr(address, "freshness_s", "5"),
					expectLagAlert(t, "inlet_pipeline.p", 5000, float64(600)),
					func(s *terraform.State) error {
						if got := readThroughAPI(t, lagAlertPath(onP))["freshness_s"]; got != float64(5) {
							return fmt.Errorf("Inlet holds freshness_s %v, want 5", got)
						}
						return nil
					},
				),
			},
			{
				// changed through the API: the plan sees it and the apply puts it back
				PreConfig: func() { putLagAlert(t, onP, `{"lag_records": 7}`) },
				Config:    config(lagAlertBlock("p", thresholds)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
				}},
				Check: expectLagAlert(t, "inlet_pipeline.p", 5000, float64(600)),
			},
			{
				// deleted through the API: set again
				PreConfig: func() {
					if err := accClient(t).Delete(context.Background(), lagAlertPath(onP), ""); err != nil {
						t.Fatalf("deleting the lag alert: %v", err)
					}
				},
				Config: config(lagAlertBlock("p", thresholds)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionCreate),
				}},
				Check: expectLagAlert(t, "inlet_pipeline.p", 5000, float64(600)),
			},
			{
				ResourceName:      address,
				ImportState:       true,
				ImportStateVerify: true,
			},
			{
				// another pipeline: the alert moves, p's is deleted
				Config: config(lagAlertBlock("q", thresholds)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionReplace),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrPair(address, "id", "inlet_pipeline.q", "id"),
					noLagAlert(t, "inlet_pipeline.p"),
					expectLagAlert(t, "inlet_pipeline.q", 5000, float64(600)),
				),
			},
			{
				Config:      config(lagAlertBlock("q", "lag_records = 0")),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`Attribute lag_records value must be between 1 and`),
			},
			{
				Config:      config(lagAlertBlock("q", "lag_records = 10\nlag_age_s = 30")),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`Attribute lag_age_s value must be between 60 and`),
			},
			{
				// removed from the configuration: deleted
				Config: config(""),
				Check:  noLagAlert(t, "inlet_pipeline.q"),
			},
			{
				// an alert Terraform does not manage is not overwritten
				PreConfig:   func() { putLagAlert(t, onP, `{"lag_records": 3}`) },
				Config:      config(lagAlertBlock("p", "lag_records = 1000")),
				ExpectError: regexp.MustCompile(`The pipeline already has a lag alert`),
			},
			{
				Config:   config(""),
				PlanOnly: true,
			},
		},
	})
}
