package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"reflect"
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

// offsetsPipelineConfig is a connection and a pipeline (in state) reading INLET_ACC_TOPIC into Delta,
// followed by extra.
func offsetsPipelineConfig(t *testing.T, name, state, extra string) string {
	return fmt.Sprintf(`
resource "inlet_connection" "c" {
  name              = %[1]q
  bootstrap_servers = %[2]q
}

resource "inlet_pipeline" "p" {
  name   = %[1]q
  source = { connection_id = inlet_connection.c.id, topics = [%[3]q] }
  target = { delta = { path = "bronze/%[1]s" } }
  state  = %[4]q
}
%[5]s`, name, accEnv(t, "INLET_ACC_BOOTSTRAP"), accEnv(t, "INLET_ACC_TOPIC"), state, extra)
}

// offsetsReplayConfig is the resource making change, and the data source reading the offsets after it.
func offsetsReplayConfig(change string) string {
	return fmt.Sprintf(`
resource "inlet_pipeline_offsets" "replay" {
  pipeline_id = inlet_pipeline.p.id
  %s
}

data "inlet_pipeline_offsets" "now" {
  pipeline_id = inlet_pipeline.p.id
  depends_on  = [inlet_pipeline_offsets.replay]
}
`, change)
}

// stateID is the id of the resource at address in s.
func stateID(s *terraform.State, address string) (string, error) {
	found, ok := s.RootModule().Resources[address]
	if !ok {
		return "", fmt.Errorf("%s is not in the state", address)
	}
	return found.Primary.ID, nil
}

// apiOffsets is what GET /pipelines/{id}/offsets answers now.
func apiOffsets(t *testing.T, pipelineID string) offsetsRead {
	t.Helper()
	answer, err := accClient(t).Get(context.Background(), offsetsPath(pipelineID), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", offsetsPath(pipelineID), err)
	}
	var read offsetsRead
	if err := json.Unmarshal(answer.Body, &read); err != nil {
		t.Fatal(err)
	}
	return read
}

// apiCommitted is each partition's committed offset as Inlet holds it, keyed "topic:partition".
func apiCommitted(read offsetsRead) map[string]int64 {
	committed := map[string]int64{}
	for _, p := range read.Partitions {
		if p.Committed != nil {
			committed[partitionKey(p.Topic, p.Partition)] = *p.Committed
		}
	}
	return committed
}

// expectCommitted checks that Inlet's offsets are want (given once the step has run), and the
// resource's committed too while the resource is there.
func expectCommitted(t *testing.T, want func() map[string]int64) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		id, err := stateID(s, "inlet_pipeline.p")
		if err != nil {
			return err
		}
		if got := apiCommitted(apiOffsets(t, id)); !reflect.DeepEqual(got, want()) {
			return fmt.Errorf("Inlet holds the offsets %v, want %v", got, want())
		}
		replay, ok := s.RootModule().Resources["inlet_pipeline_offsets.replay"]
		if !ok {
			return nil
		}
		attributes := replay.Primary.Attributes
		if count := attributes["committed.%"]; count != strconv.Itoa(len(want())) {
			return fmt.Errorf("committed holds %s offsets, want %v", count, want())
		}
		for key, offset := range want() {
			if got := attributes["committed."+key]; got != strconv.FormatInt(offset, 10) {
				return fmt.Errorf("committed[%q] is %q, want %d", key, got, offset)
			}
		}
		return nil
	}
}

func updatePlanned(action plancheck.ResourceActionType) resource.ConfigPlanChecks {
	return resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
		plancheck.ExpectResourceAction("inlet_pipeline_offsets.replay", action),
		plancheck.ExpectUnknownValue("inlet_pipeline_offsets.replay", tfjsonpath.New("committed")),
	}}
}

func TestAccPipelineOffsetsReplays(t *testing.T) {
	name := acctest.RandomWithPrefix("acc-offsets")
	topic := accEnv(t, "INLET_ACC_TOPIC")
	explicit := fmt.Sprintf(`offsets = { "%[1]s:0" = 2, "%[1]s:1" = 0 }`, topic)
	paused := func(change string) string {
		return offsetsPipelineConfig(t, name, "paused", offsetsReplayConfig(change))
	}
	start := map[string]int64{topic + ":0": 0, topic + ":1": 0}
	var latest map[string]int64 // the topic's end, read once the offsets are explicit
	var pipelineIDs []string

	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy: func(s *terraform.State) error {
			for _, id := range pipelineIDs {
				if found, err := accClient(t).Find(context.Background(), "/pipelines/"+id); err != nil || found != nil {
					return fmt.Errorf("pipeline %s still there after destroy (%v)", id, err)
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			// a replay is refused while the pipeline is active, with Inlet's own words
			{
				Config:      offsetsPipelineConfig(t, name, "active", offsetsReplayConfig(explicit)),
				ExpectError: regexp.MustCompile(`409[\s\S]*paused`),
			},
			// ... and applied once it is paused: explicit offsets, under If-Match
			{
				Config:           paused(explicit),
				ConfigPlanChecks: updatePlanned(plancheck.ResourceActionCreate),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("inlet_pipeline_offsets.replay", tfjsonpath.New("replay_mode"),
						knownvalue.StringExact("append")),
					statecheck.ExpectKnownValue("data.inlet_pipeline_offsets.now", tfjsonpath.New("cluster_status"),
						knownvalue.StringExact("ok")),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					func(s *terraform.State) error {
						id, err := stateID(s, "inlet_pipeline.p")
						pipelineIDs = append(pipelineIDs, id)
						return err
					},
					resource.TestCheckResourceAttrPair("inlet_pipeline_offsets.replay", "id", "inlet_pipeline.p", "id"),
					expectCommitted(t, func() map[string]int64 { return map[string]int64{topic + ":0": 2, topic + ":1": 0} }),
					func(s *terraform.State) error {
						id, _ := stateID(s, "inlet_pipeline.p")
						read := apiOffsets(t, id)
						latest = map[string]int64{}
						var total int64
						for _, p := range read.Partitions {
							latest[partitionKey(p.Topic, p.Partition)] = *p.Latest
							total += *p.Latest
						}
						if total != 20 {
							return fmt.Errorf("the topic ends at %v: %d records, want 20", latest, total)
						}
						return resource.TestCheckResourceAttrWith("data.inlet_pipeline_offsets.now", "total_lag",
							func(value string) error {
								lag, err := strconv.ParseInt(value, 10, 64)
								if err != nil || lag <= 0 || read.TotalLag == nil || lag != *read.TotalLag {
									return fmt.Errorf("total_lag %s, want Inlet's %v (> 0)", value, read.TotalLag)
								}
								return nil
							})(s)
					},
					resource.TestCheckResourceAttr("data.inlet_pipeline_offsets.now", "committed.%", "2"),
					resource.TestCheckResourceAttr("data.inlet_pipeline_offsets.now", "lag.%", "2"),
				),
			},
			// import by the pipeline's id: the committed offsets become offsets
			{
				ResourceName:      "inlet_pipeline_offsets.replay",
				ImportState:       true,
				ImportStateVerify: true,
				ImportStateIdFunc: func(s *terraform.State) (string, error) { return stateID(s, "inlet_pipeline.p") },
			},
			// another change is another move: back to earliest, replacing what was written ...
			{
				Config:           paused(fmt.Sprintf("reset = \"earliest\"\n  topics = [%q]\n  replay_mode = \"replace\"", topic)),
				ConfigPlanChecks: updatePlanned(plancheck.ResourceActionUpdate),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("inlet_pipeline_offsets.replay", tfjsonpath.New("replay_mode"),
						knownvalue.StringExact("replace"))},
				Check: expectCommitted(t, func() map[string]int64 { return start }),
			},
			// ... to latest, a skip (replay_mode back to its default) ...
			{
				Config:           paused(`reset = "latest"`),
				ConfigPlanChecks: updatePlanned(plancheck.ResourceActionUpdate),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("inlet_pipeline_offsets.replay", tfjsonpath.New("replay_mode"),
						knownvalue.StringExact("append"))},
				Check: expectCommitted(t, func() map[string]int64 { return latest }),
			},
			// destroying the resource leaves the offsets where they are
			{
				Config: offsetsPipelineConfig(t, name, "paused", ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("inlet_pipeline_offsets.replay", plancheck.ResourceActionDestroy),
				}},
				Check: expectCommitted(t, func() map[string]int64 { return latest }),
			},
			// back to the pipeline's starting offsets (DELETE): four moves in the offsets' history
			{
				Config:           paused(`reset = "starting_offsets"`),
				ConfigPlanChecks: updatePlanned(plancheck.ResourceActionCreate),
				Check: resource.ComposeAggregateTestCheckFunc(
					expectCommitted(t, func() map[string]int64 { return start }),
					func(s *terraform.State) error {
						id, _ := stateID(s, "inlet_pipeline.p")
						answer, err := accClient(t).Get(context.Background(), offsetsPath(id)+"/history", url.Values{"limit": {"50"}})
						if err != nil {
							return err
						}
						var history struct {
							Total int `json:"total"`
						}
						if err := json.Unmarshal(answer.Body, &history); err != nil {
							return err
						}
						if history.Total != 4 {
							return fmt.Errorf("the offsets' history holds %d changes, want 4", history.Total)
						}
						return nil
					},
				),
			},
			// offsets moved through the API (as runs move them) are not drift: the plan stays empty
			{
				PreConfig: func() {
					id := pipelineIDs[0]
					current, err := accClient(t).Get(context.Background(), offsetsPath(id), nil)
					if err != nil {
						t.Fatalf("GET offsets: %v", err)
					}
					if _, err := accClient(t).Patch(context.Background(), offsetsPath(id),
						map[string]any{"reset": "latest"}, current.ETag); err != nil {
						t.Fatalf("PATCH offsets: %v", err)
					}
				},
				Config:   paused(`reset = "starting_offsets"`),
				PlanOnly: true,
			},
			// the pipeline deleted outside Terraform takes the resource with it: both are created again
			{
				PreConfig: func() {
					if err := accClient(t).Delete(context.Background(), "/pipelines/"+pipelineIDs[0], ""); err != nil {
						t.Fatalf("DELETE pipeline: %v", err)
					}
				},
				Config: paused(`reset = "starting_offsets"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("inlet_pipeline.p", plancheck.ResourceActionCreate),
					plancheck.ExpectResourceAction("inlet_pipeline_offsets.replay", plancheck.ResourceActionCreate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					func(s *terraform.State) error {
						id, err := stateID(s, "inlet_pipeline.p")
						if err == nil && id == pipelineIDs[0] {
							err = fmt.Errorf("the pipeline was not created again")
						}
						pipelineIDs = append(pipelineIDs, id)
						return err
					},
					resource.TestCheckResourceAttrPair("inlet_pipeline_offsets.replay", "pipeline_id", "inlet_pipeline.p", "id"),
				),
			},
		},
	})
}

// loosely matches words as the CLI prints them: wrapped at any space.
func loosely(pattern string) *regexp.Regexp {
	return regexp.MustCompile(strings.ReplaceAll(pattern, " ", `\s+`))
}

func TestAccPipelineOffsetsRefusedAtPlan(t *testing.T) {
	refused := func(change, pattern string) resource.TestStep {
		return resource.TestStep{
			Config: fmt.Sprintf(`
resource "inlet_pipeline_offsets" "bad" {
  pipeline_id = "7b0f3c2e-5d4a-4f8e-9c1b-2a3d4e5f6a7b"
  %s
}
`, change),
			PlanOnly:    true,
			ExpectError: loosely(pattern),
		}
	}
	modes := `offsets,reset,to_timestamp`
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			refused(`offsets = { "orders" = 3 }`, `Not a "topic:partition" key[\s\S]*offsets key "orders"`),
			refused(`offsets = { "orders:x" = 3 }`, `offsets key "orders:x"`),
			refused(`offsets = { "bad topic:0" = 3 }`, `offsets key "bad topic:0"`),
			refused(`offsets = { "orders:0" = -1 }`, `Attribute offsets\["orders:0"\] value must be at least 0`),
			refused(`offsets = {}`, `Attribute offsets map must contain at least 1 elements`),
			refused(`replay_mode = "append"`, `Missing Attribute Configuration[\s\S]*`+modes),
			refused("reset = \"latest\"\n  offsets = { \"orders:0\" = 3 }", `Invalid Attribute Combination[\s\S]*`+modes),
			refused(`reset = "soon"`, `Attribute reset value must be one of`),
			refused(`to_timestamp = "yesterday"`, `Not an RFC 3339 time[\s\S]*to_timestamp`),
			refused("reset = \"latest\"\n  replay_mode = \"overwrite\"", `Attribute replay_mode value must be one of`),
			refused("reset = \"latest\"\n  topics = [\"bad topic\"]", `Attribute topics\[0\] must be a Kafka topic name`),
			refused("offsets = { \"orders:0\" = 3 }\n  topics = [\"orders\"]", `topics goes with reset or to_timestamp`),
			refused("reset = \"starting_offsets\"\n  topics = [\"orders\"]", `reset = "starting_offsets" takes no topics`),
			refused("reset = \"starting_offsets\"\n  clamp = true", `reset = "starting_offsets" takes no clamp`),
			refused("reset = \"starting_offsets\"\n  replay_mode = \"replace\"", `reset = "starting_offsets" takes no replay_mode`),
		},
	})
}

// TestAccPipelineOffsetsImportByIdentityWriteOnly imports the offsets by their resource identity (the
// pipeline's id) on CLIs that have identities (OpenTofu 1.12), and by an import block's id on the
// others: the committed offsets read back as the configuration's, so the import plans nothing else.
func TestAccPipelineOffsetsImportByIdentityWriteOnly(t *testing.T) {
	name := acctest.RandomWithPrefix("acc-offsets-identity")
	topic := accEnv(t, "INLET_ACC_TOPIC")
	config := offsetsPipelineConfig(t, name, "paused", offsetsReplayConfig(
		fmt.Sprintf(`offsets = { "%[1]s:0" = 5, "%[1]s:1" = 1 }`, topic)))
	kind := resource.ImportBlockWithID
	if os.Getenv("INLET_ACC_CLI_WRITE_ONLY") != "" {
		kind = resource.ImportBlockWithResourceIdentity
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			{
				Config: config,
				Check:  expectCommitted(t, func() map[string]int64 { return map[string]int64{topic + ":0": 5, topic + ":1": 1} }),
			},
			{Config: config, ResourceName: "inlet_pipeline_offsets.replay", ImportState: true, ImportStateKind: kind},
		},
	})
}
