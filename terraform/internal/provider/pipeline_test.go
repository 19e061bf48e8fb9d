package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/acctest"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// pipelineConfig is a connection and two pipelines reading INLET_ACC_TOPIC: one into Delta, one into
// Kafka. Every nested block refers to the connection's id, unknown until it is created, so one
// apply must plan them with unknown values inside.
func pipelineConfig(name, bootstrap, topic, schedule, extra string) string {
	return fmt.Sprintf(`
resource "inlet_connection" "c" {
  name              = %[1]q
  bootstrap_servers = %[2]q
}

resource "inlet_pipeline" "orders" {
  name = %[1]q
  source = {
    connection_id = inlet_connection.c.id
    topics        = [%[3]q]
    value_format  = "string"
  }
  target = {
    delta = {
      path        = "bronze/${inlet_connection.c.id}"
      maintenance = { vacuum = { retention_hours = 240 } }
    }
  }
  schedule = %[4]s
  %[5]s
}

resource "inlet_pipeline" "mirror" {
  name   = "%[1]s-mirror"
  state  = "paused"
  source = {
    connection_id              = inlet_connection.c.id
    topics                     = [%[3]q]
    starting_partition_offsets = { %[3]q = { "0" = 5, "1" = 0 } }
    key_format                 = "string"
    include_headers            = true
  }
  target = {
    kafka = {
      connection_id = inlet_connection.c.id
      topic         = "%[1]s-copy"
      create_topic  = { partitions = 2, config = { "retention.ms" = "86400000" } }
    }
  }
}

data "inlet_pipeline" "by_name" {
  name       = inlet_pipeline.orders.name
  depends_on = [inlet_pipeline.orders]
}
`, name, bootstrap, topic, schedule, extra)
}

// apiPipeline is the pipeline as Inlet holds it.
func apiPipeline(t *testing.T, s *terraform.State, address string) map[string]any {
	t.Helper()
	id := s.RootModule().Resources[address].Primary.ID
	answer, err := accClient(t).Get(context.Background(), "/pipelines/"+id, nil)
	if err != nil {
		t.Fatalf("GET /pipelines/%s: %v", id, err)
	}
	var body map[string]any
	if err := json.Unmarshal(answer.Body, &body); err != nil {
		t.Fatal(err)
	}
	return body
}

// patchThroughAPI changes an object behind Terraform's back, as the portal or a script would.
func patchThroughAPI(t *testing.T, path, body string) {
	t.Helper()
	if _, err := accClient(t).Patch(context.Background(), path, json.RawMessage(body), ""); err != nil {
		t.Fatalf("PATCH %s: %v", path, err)
	}
}

func expectDocument(t *testing.T, address, field string, want func(s *terraform.State) any) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		got := apiPipeline(t, s, address)[field]
		if expected := want(s); !reflect.DeepEqual(got, expected) {
			return fmt.Errorf("Inlet holds %s %v, want %v", field, got, expected)
		}
		return nil
	}
}

func TestAccPipelineLifecycle(t *testing.T) {
	name := acctest.RandomWithPrefix("acc-pipeline")
	bootstrap, topic := accEnv(t, "INLET_ACC_BOOTSTRAP"), accEnv(t, "INLET_ACC_TOPIC")
	interval := "{ interval_seconds = length(inlet_connection.c.id) * 10 }"
	cron := `{ cron = "*/10 * * * *", timezone = "Europe/Paris" }`
	var pipelineID string
	connectionID := func(s *terraform.State) string { return s.RootModule().Resources["inlet_connection.c"].Primary.ID }

	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy: func(s *terraform.State) error {
			if pipelineID == "" {
				return fmt.Errorf("the pipeline was never created")
			}
			if found, err := accClient(t).Find(context.Background(), "/pipelines/"+pipelineID); err != nil || found != nil {
				return fmt.Errorf("pipeline %s still there after destroy (%v)", pipelineID, err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{ // one apply, though every nested block waits on the connection's id; then an empty plan
				Config: pipelineConfig(name, bootstrap, topic, interval, ""),
				Check: resource.ComposeAggregateTestCheckFunc(
					func(s *terraform.State) error {
						pipelineID = s.RootModule().Resources["inlet_pipeline.orders"].Primary.ID
						return nil
					},
					resource.TestCheckResourceAttr("inlet_pipeline.orders", "state", "active"),
					resource.TestCheckResourceAttr("inlet_pipeline.orders", "schedule.interval_seconds", "360"),
					resource.TestCheckResourceAttrPair("inlet_pipeline.orders", "source.connection_id", "inlet_connection.c", "id"),
					resource.TestCheckResourceAttrSet("inlet_pipeline.orders", "target_uri"),
					resource.TestCheckResourceAttr("inlet_pipeline.mirror", "source.starting_partition_offsets."+topic+".0", "5"),
					resource.TestCheckResourceAttr("data.inlet_pipeline.by_name", "target.delta.maintenance.vacuum.retention_hours", "240"),
					resource.TestCheckResourceAttrPair("data.inlet_pipeline.by_name", "id", "inlet_pipeline.orders", "id"),
					// as written: no defaults added, the registry version a number, the target's kind its type
					expectDocument(t, "inlet_pipeline.orders", "source", func(s *terraform.State) any {
						return map[string]any{"connection_id": connectionID(s), "topics": []any{topic}, "value_format": "string"}
					}),
					expectDocument(t, "inlet_pipeline.orders", "target", func(s *terraform.State) any {
						return map[string]any{"type": "delta", "path": "bronze/" + connectionID(s),
							"maintenance": map[string]any{"vacuum": map[string]any{"retention_hours": float64(240)}}}
					}),
					expectDocument(t, "inlet_pipeline.mirror", "source", func(s *terraform.State) any {
						return map[string]any{"connection_id": connectionID(s), "topics": []any{topic},
							"starting_offsets": map[string]any{topic: map[string]any{"0": float64(5), "1": float64(0)}},
							"key_format":       "string", "include_headers": true}
					}),
				),
			},
			{ // an update goes out under If-Match; target_uri stays known in the plan
				Config: pipelineConfig(name, bootstrap, topic, cron, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("inlet_pipeline.orders", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("inlet_pipeline.orders", tfjsonpath.New("target_uri"), knownvalue.NotNull()),
					plancheck.ExpectUnknownValue("inlet_pipeline.orders", tfjsonpath.New("etag")),
				}},
				Check: expectDocument(t, "inlet_pipeline.orders", "schedule", func(*terraform.State) any {
					return map[string]any{"cron": "*/10 * * * *", "timezone": "Europe/Paris"}
				}),
			},
			{ // a continuous schedule, its wait written and its cap left to the default
				Config: pipelineConfig(name, bootstrap, topic, `{ continuous = true, idle_wait_ms = 250 }`, ""),
				Check: expectDocument(t, "inlet_pipeline.orders", "schedule", func(*terraform.State) any {
					return map[string]any{"continuous": true, "idle_wait_ms": float64(250)}
				}),
			},
			{ // drift made through the API shows, and apply puts the configuration back
				PreConfig: func() {
					patchThroughAPI(t, "/pipelines/"+pipelineID, `{"source": {"max_offsets_per_run": 5}, "state": "paused"}`)
				},
				Config: pipelineConfig(name, bootstrap, topic, cron, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("inlet_pipeline.orders", plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("inlet_pipeline.orders", "state", "active"),
					resource.TestCheckNoResourceAttr("inlet_pipeline.orders", "source.max_offsets_per_run"),
				),
			},
			{ // deleted outside Terraform: planned for creation, and created
				PreConfig: func() {
					if err := accClient(t).Delete(context.Background(), "/pipelines/"+pipelineID, ""); err != nil {
						t.Fatal(err)
					}
				},
				Config: pipelineConfig(name, bootstrap, topic, cron, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("inlet_pipeline.orders", plancheck.ResourceActionCreate),
				}},
				Check: func(s *terraform.State) error {
					pipelineID = s.RootModule().Resources["inlet_pipeline.orders"].Primary.ID
					return nil
				},
			},
			{ // import by id reads back exactly what state holds
				ResourceName:      "inlet_pipeline.orders",
				ImportState:       true,
				ImportStateVerify: true,
			},
			{
				ResourceName:      "inlet_pipeline.mirror",
				ImportState:       true,
				ImportStateVerify: true,
			},
		},
	})
}

func TestAccPipelineKeyedTable(t *testing.T) {
	name := acctest.RandomWithPrefix("acc-keyed")
	bootstrap, topic := accEnv(t, "INLET_ACC_BOOTSTRAP"), accEnv(t, "INLET_ACC_TOPIC")
	config := fmt.Sprintf(`
resource "inlet_connection" "c" {
  name              = %[1]q
  bootstrap_servers = %[2]q
}

resource "inlet_pipeline" "customers" {
  name  = %[1]q
  state = "paused"
  source = {
    connection_id      = inlet_connection.c.id
    topics             = [%[3]q]
    value_format       = "json"
    schema             = "id BIGINT, name STRING, tier INT"
    starting_timestamp = "2026-01-01T00:00:00+00:00"
  }
  target = {
    delta = {
      path           = "silver/%[1]s"
      mode           = "upsert"
      key            = ["id"]
      sequence_by    = "source.lsn"
      changes        = "debezium"
      scd_type       = 1
      deletes        = "soft"
    }
  }
}
`, name, bootstrap, topic)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{
				Config: config,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("inlet_pipeline.customers", "target.delta.deletes", "soft"),
					// written +00:00, kept so in state whatever spelling Inlet answers with
					resource.TestCheckResourceAttr("inlet_pipeline.customers", "source.starting_timestamp", "2026-01-01T00:00:00+00:00"),
				),
			},
			{ResourceName: "inlet_pipeline.customers", ImportState: true, ImportStateVerify: true,
				// an import has no configuration to lend its spelling of the same instant
				ImportStateVerifyIgnore: []string{"source.starting_timestamp"}},
		},
	})
}

// contractConfig is a pipeline of json values into Delta (a contract tests decoded rows) whose contract
// has two rules, the first's action given, and one sensitive field, email, protected as protect says;
// without an action, the pipeline has no contract.
func contractConfig(name, bootstrap, topic, action, protect string) string {
	contract := ""
	if action != "" {
		contract = fmt.Sprintf(`contract = {
    expectations = [
      { name = "positive_amount", predicate = "amount > 0", action = %q, alert_over_rows = 100, alert_over_ratio = 0.01 },
      { name = "has_id", predicate = "id IS NOT NULL" },
    ]
    sensitive = [{ field = "email", action = %q }]
  }`, action, protect)
	}
	return fmt.Sprintf(`
resource "inlet_connection" "c" {
  name              = %[1]q
  bootstrap_servers = %[2]q
}

resource "inlet_pipeline" "payments" {
  name = %[1]q
  source = {
    connection_id = inlet_connection.c.id
    topics        = [%[3]q]
    value_format  = "json"
    schema        = "id BIGINT, amount DOUBLE, email STRING"
  }
  target = { delta = { path = "bronze/${inlet_connection.c.id}" } }
  %[4]s
}

data "inlet_pipeline" "by_id" {
  id = inlet_pipeline.payments.id
}
`, name, bootstrap, topic, contract)
}

// TestAccPipelineContract: a contract of two rules and a sensitive field is created as written and
// plans no change after, an action of each changes in place, an import reads it back, a predicate
// Inlet cannot parse and a field that is not a column are its 422 naming them, and a configuration
// without the contract removes it.
func TestAccPipelineContract(t *testing.T) {
	name := acctest.RandomWithPrefix("acc-contract")
	bootstrap, topic := accEnv(t, "INLET_ACC_BOOTSTRAP"), accEnv(t, "INLET_ACC_TOPIC")
	rules := func(action, protect string) any {
		return map[string]any{"expectations": []any{
			map[string]any{"name": "positive_amount", "predicate": "amount > 0", "action": action,
				"alert_over_rows": float64(100), "alert_over_ratio": 0.01},
			map[string]any{"name": "has_id", "predicate": "id IS NOT NULL"},
		}, "sensitive": []any{map[string]any{"field": "email", "action": protect}},
			"evolution": "add"} // left out of the configuration: its default, planned and sent
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{
				Config: contractConfig(name, bootstrap, topic, "quarantine", "hash"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("inlet_pipeline.payments", "contract.expectations.#", "2"),
					resource.TestCheckResourceAttr("inlet_pipeline.payments", "contract.expectations.0.action", "quarantine"),
					resource.TestCheckResourceAttr("inlet_pipeline.payments", "contract.expectations.0.alert_over_ratio", "0.01"),
					resource.TestCheckNoResourceAttr("inlet_pipeline.payments", "contract.expectations.1.action"),
					resource.TestCheckResourceAttr("data.inlet_pipeline.by_id", "contract.expectations.1.name", "has_id"),
					resource.TestCheckResourceAttr("inlet_pipeline.payments", "contract.sensitive.#", "1"),
					resource.TestCheckResourceAttr("inlet_pipeline.payments", "contract.sensitive.0.field", "email"),
					resource.TestCheckResourceAttr("data.inlet_pipeline.by_id", "contract.sensitive.0.action", "hash"),
					resource.TestCheckResourceAttr("inlet_pipeline.payments", "contract.evolution", "add"),
					resource.TestCheckResourceAttr("data.inlet_pipeline.by_id", "contract.evolution", "add"),
					// as written: the second rule's action and thresholds left out, evolution's default sent
					expectDocument(t, "inlet_pipeline.payments", "contract", func(*terraform.State) any {
						return rules("quarantine", "hash")
					}),
				),
			},
			{ // a rule's action and the field's change in place; target_uri stays known in the plan
				Config: contractConfig(name, bootstrap, topic, "fail", "redact"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("inlet_pipeline.payments", plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue("inlet_pipeline.payments", tfjsonpath.New("target_uri"), knownvalue.NotNull()),
					},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("inlet_pipeline.payments", "contract.expectations.0.action", "fail"),
					resource.TestCheckResourceAttr("data.inlet_pipeline.by_id", "contract.expectations.0.action", "fail"),
					resource.TestCheckResourceAttr("inlet_pipeline.payments", "contract.sensitive.0.action", "redact"),
					resource.TestCheckResourceAttr("data.inlet_pipeline.by_id", "contract.sensitive.0.action", "redact"),
					expectDocument(t, "inlet_pipeline.payments", "contract", func(*terraform.State) any {
						return rules("fail", "redact")
					}),
				),
			},
			{ResourceName: "inlet_pipeline.payments", ImportState: true, ImportStateVerify: true},
			{ // the predicate is Inlet's to parse: its 422 names the rule
				Config:      strings.Replace(contractConfig(name, bootstrap, topic, "fail", "redact"), "id IS NOT NULL", "id IS NOT", 1),
				ExpectError: regexp.MustCompile(`contract\.expectations\[1\]\.predicate`),
			},
			{ // whether a field is a column of the schema is Inlet's to say: its 422 names the field
				Config:      strings.Replace(contractConfig(name, bootstrap, topic, "fail", "redact"), `"email"`, `"phone"`, 1),
				ExpectError: regexp.MustCompile(`contract\.sensitive\[0\]\.field`),
			},
			{ // left out of the configuration: Inlet holds no contract
				Config: contractConfig(name, bootstrap, topic, "", ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("inlet_pipeline.payments", plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckNoResourceAttr("inlet_pipeline.payments", "contract"),
					expectDocument(t, "inlet_pipeline.payments", "contract", func(*terraform.State) any { return nil }),
				),
			},
		},
	})
}

// Bad values are refused at plan, with the attribute named, before Inlet is asked.
func TestAccPipelineRefusedAtPlan(t *testing.T) {
	bootstrap := accEnv(t, "INLET_ACC_BOOTSTRAP")
	withContract := func(source, target, schedule, contract string) string {
		return fmt.Sprintf(`
resource "inlet_connection" "c" {
  name              = "refused"
  bootstrap_servers = %q
}
resource "inlet_pipeline" "p" {
  name     = "refused"
  source   = %s
  target   = %s
  schedule = %s
  contract = %s
}
`, bootstrap, source, target, schedule, contract)
	}
	with := func(source, target, schedule string) string { return withContract(source, target, schedule, "null") }
	good := `{ connection_id = inlet_connection.c.id, topics = ["t"] }`
	delta := `{ delta = { path = "bronze/t" } }`
	cases := []struct{ config, refusal string }{
		{with(`{ connection_id = inlet_connection.c.id, topics = ["t"], value_format = "xml" }`, delta, "null"),
			`source.value_format[\s\S]*value must be one of`},
		{with(`{ connection_id = inlet_connection.c.id }`, delta, "null"), `topics[\s\S]*topic_pattern`},
		{with(`{ connection_id = inlet_connection.c.id, topics = ["not a topic"] }`, delta, "null"), `Kafka topic name`},
		{with(good, `{}`, "null"), `delta[\s\S]*kafka`},
		{with(good, `{ delta = { path = "b", mode = "merge" } }`, "null"), `target.delta.mode`},
		{with(good, delta, `{ interval_seconds = 5 }`), `schedule.interval_seconds[\s\S]*between 10`},
		{with(good, delta, `{ cron = "*/5 * * * *", interval_seconds = 60 }`), `cron[\s\S]*interval_seconds`},
		{with(good, delta, `{ interval_seconds = 60, continuous = true }`), `interval_seconds[\s\S]*continuous`},
		{with(good, delta, `{ continuous = false }`), `schedule.continuous[\s\S]*true`},
		{with(good, delta, `{ interval_seconds = 60, idle_wait_ms = 100 }`), `schedule.continuous[\s\S]*schedule.idle_wait_ms`},
		{with(`{ connection_id = inlet_connection.c.id, topics = ["t"], value_schema = { version = "v3" } }`, delta, "null"),
			`source.value_schema.version[\s\S]*version number or "latest"`},
		{with(`{ connection_id = inlet_connection.c.id, topics = ["t"], starting_timestamp = "yesterday" }`, delta, "null"),
			`source.starting_timestamp[\s\S]*RFC 3339`},
		{withContract(good, delta, "null", `{ expectations = [{ name = "a", predicate = "x > 0" }, { name = "A", predicate = "x < 9" }] }`),
			`contract.expectations\[1\].name[\s\S]*already\s+the\s+name\s+of\s+contract.expectations\[0\]`},
		{withContract(good, delta, "null", `{ expectations = [{ name = "a", predicate = "x > 0", action = "drop" }] }`),
			`contract.expectations\[0\].action[\s\S]*value\s+must\s+be\s+one\s+of`},
		{withContract(good, delta, "null", `{ expectations = [{ name = "a", predicate = "x > 0", alert_over_ratio = 0 }] }`),
			`contract.expectations\[0\].alert_over_ratio[\s\S]*greater\s+than\s+0`},
		{withContract(good, delta, "null", `{ sensitive = [{ field = "customer.ssn", action = "drop" }] }`),
			`contract.sensitive\[0\].field[\s\S]*drop\s+takes\s+a\s+top-level\s+column`},
	}
	steps := make([]resource.TestStep, 0, len(cases))
	for _, c := range cases {
		steps = append(steps, resource.TestStep{Config: c.config, PlanOnly: true, ExpectError: regexp.MustCompile(c.refusal)})
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		Steps:                    steps,
	})
}
