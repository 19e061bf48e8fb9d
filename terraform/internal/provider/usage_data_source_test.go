package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/acctest"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// usageConfig reads the pipeline's usage by hour (the default range) and by day, and an explicit
// range long past that holds none.
const usageConfig = `
data "inlet_usage" "hourly" {
  pipeline_id = inlet_pipeline.p.id
}

data "inlet_usage" "daily" {
  pipeline_id = inlet_pipeline.p.id
  granularity = "day"
}

data "inlet_usage" "past" {
  from        = "2020-01-01T01:00:00+01:00"
  to          = "2020-01-02T00:00:00Z"
  granularity = "day"
}
`

// cancelledRuns triggers and cancels n runs of the pipeline: each is metered as a cancelled attempt.
func cancelledRuns(t *testing.T, pipelineID string, n int) {
	t.Helper()
	client := accClient(t)
	for range n {
		answer, err := client.Post(context.Background(), "/pipelines/"+pipelineID+"/runs", "")
		if err != nil {
			t.Fatalf("triggering a run: %v", err)
		}
		var run struct {
			ID string `json:"id"`
		}
		if err := answer.Decode(&run); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Post(context.Background(), "/runs/"+run.ID+"/cancel", ""); err != nil {
			t.Fatalf("cancelling run %s: %v", run.ID, err)
		}
	}
}

// expectUsageAsAPI checks the data source at address against GET /usage over the range it read:
// every bucket as Inlet gives it, and the sums of them.
func expectUsageAsAPI(t *testing.T, address string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		found, ok := s.RootModule().Resources[address]
		if !ok {
			return fmt.Errorf("%s is not in the state", address)
		}
		attributes := found.Primary.Attributes
		query := url.Values{"from": {attributes["from"]}, "to": {attributes["to"]},
			"granularity": {attributes["granularity"]}, "pipeline_id": {attributes["pipeline_id"]}}
		answer, err := accClient(t).Get(context.Background(), "/usage", query)
		if err != nil {
			return err
		}
		var report usageReport
		if err := json.Unmarshal(answer.Body, &report); err != nil {
			return err
		}
		if got := attributes["buckets.#"]; got != strconv.Itoa(len(report.Items)) || len(report.Items) == 0 {
			return fmt.Errorf("%s holds %s buckets, Inlet %d (want some)", address, got, len(report.Items))
		}
		cancelled := 0
		for i, row := range report.Items {
			prefix := fmt.Sprintf("buckets.%d.", i)
			want := map[string]string{
				"pipeline_id": *row.PipelineID, "pipeline_name": *row.PipelineName, "bucket": row.Bucket,
				"records_read": strconv.FormatInt(row.RecordsRead, 10), "rows_written": strconv.FormatInt(row.RowsWritten, 10),
				"bytes_read": strconv.FormatInt(row.BytesRead, 10), "wall_seconds": strconv.FormatFloat(row.WallSeconds, 'f', -1, 64),
				"runs.%": "5", "runs.cancelled": strconv.FormatInt(row.Runs["cancelled"], 10),
				"runs.succeeded": strconv.FormatInt(row.Runs["succeeded"], 10),
			}
			for name, value := range want {
				if got := attributes[prefix+name]; got != value {
					return fmt.Errorf("%s %s%s is %q, Inlet's %q", address, prefix, name, got, value)
				}
			}
			cancelled += int(row.Runs["cancelled"])
		}
		if got := attributes["runs.cancelled"]; got != strconv.Itoa(cancelled) {
			return fmt.Errorf("%s runs.cancelled is %s, the buckets sum to %d", address, got, cancelled)
		}
		return nil
	}
}

func TestAccUsage(t *testing.T) {
	name := acctest.RandomWithPrefix("acc-usage")
	var pipelineID string
	runs := func(cancelled int) knownvalue.Check {
		return knownvalue.MapExact(map[string]knownvalue.Check{
			"succeeded": knownvalue.Int64Exact(0), "failed": knownvalue.Int64Exact(0), "retried": knownvalue.Int64Exact(0),
			"cancelled": knownvalue.Int64Exact(int64(cancelled)), "skipped": knownvalue.Int64Exact(0),
		})
	}
	zero := func(address string) []statecheck.StateCheck {
		var checks []statecheck.StateCheck
		for _, figure := range []string{"records_read", "rows_written", "rows_quarantined", "bytes_read", "bytes_written"} {
			checks = append(checks, statecheck.ExpectKnownValue(address, tfjsonpath.New(figure), knownvalue.Int64Exact(0)))
		}
		return append(checks, statecheck.ExpectKnownValue(address, tfjsonpath.New("engine_seconds"), knownvalue.Float64Exact(0)))
	}
	pipeline := offsetsPipelineConfig(t, name, "active", "")
	usage := pipeline + usageConfig

	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy: func(s *terraform.State) error {
			if found, err := accClient(t).Find(context.Background(), "/pipelines/"+pipelineID); err != nil || found != nil {
				return fmt.Errorf("pipeline %s still there after destroy (%v)", pipelineID, err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: pipeline,
				Check: func(s *terraform.State) (err error) {
					pipelineID, err = stateID(s, "inlet_pipeline.p")
					return err
				},
			},
			// a range Inlet refuses is an error in Inlet's words; bad arguments are refused at plan (before
			// the last step: the destroy after it plans with that step's configuration)
			{
				Config: pipeline + `
data "inlet_usage" "backwards" {
  from = "2026-11-21T00:00:00Z"
  to   = "2026-11-20T00:00:00Z"
}
`,
				PlanOnly:    true,
				ExpectError: loosely(`Reading the usage: Inlet answered 422[\s\S]*from must be before to`),
			},
			{
				Config:      pipeline + "data \"inlet_usage\" \"bad\" {\n  granularity = \"week\"\n}\n",
				PlanOnly:    true,
				ExpectError: loosely(`Attribute granularity value must be one of`),
			},
			{
				Config:      pipeline + "data \"inlet_usage\" \"bad\" {\n  from = \"yesterday\"\n}\n",
				PlanOnly:    true,
				ExpectError: loosely(`Not an RFC 3339 time[\s\S]*from`),
			},
			// two runs cancelled before they started: two attempts metered, nothing read
			{
				PreConfig: func() { cancelledRuns(t, pipelineID, 2) },
				Config:    usage,
				ConfigStateChecks: append(append(zero("data.inlet_usage.hourly"),
					statecheck.ExpectKnownValue("data.inlet_usage.hourly", tfjsonpath.New("runs"), runs(2)),
					statecheck.ExpectKnownValue("data.inlet_usage.hourly", tfjsonpath.New("granularity"), knownvalue.StringExact("hour")),
					statecheck.ExpectKnownValue("data.inlet_usage.daily", tfjsonpath.New("runs"), runs(2)),
					statecheck.ExpectKnownValue("data.inlet_usage.daily", tfjsonpath.New("granularity"), knownvalue.StringExact("day")),
					// the range as written (the same instant as Inlet's 2020-01-01T00:00:00Z), and nothing in it
					statecheck.ExpectKnownValue("data.inlet_usage.past", tfjsonpath.New("from"), knownvalue.StringExact("2020-01-01T01:00:00+01:00")),
					statecheck.ExpectKnownValue("data.inlet_usage.past", tfjsonpath.New("to"), knownvalue.StringExact("2020-01-02T00:00:00Z")),
					statecheck.ExpectKnownValue("data.inlet_usage.past", tfjsonpath.New("pipeline_id"), knownvalue.Null()),
					statecheck.ExpectKnownValue("data.inlet_usage.past", tfjsonpath.New("runs"), runs(0)),
					statecheck.ExpectKnownValue("data.inlet_usage.past", tfjsonpath.New("wall_seconds"), knownvalue.Float64Exact(0)),
					statecheck.ExpectKnownValue("data.inlet_usage.past", tfjsonpath.New("buckets"), knownvalue.ListExact([]knownvalue.Check{})),
				), zero("data.inlet_usage.past")...),
				Check: resource.ComposeAggregateTestCheckFunc(
					expectUsageAsAPI(t, "data.inlet_usage.hourly"),
					expectUsageAsAPI(t, "data.inlet_usage.daily"),
					resource.TestCheckResourceAttrPair("data.inlet_usage.hourly", "buckets.0.pipeline_id", "inlet_pipeline.p", "id"),
					resource.TestCheckResourceAttrPair("data.inlet_usage.hourly", "buckets.0.pipeline_name", "inlet_pipeline.p", "name"),
				),
			},
		},
	})
}
