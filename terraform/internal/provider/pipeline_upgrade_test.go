package provider

import (
	"context"
	"encoding/json"
	"math/big"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// TestPipelineUpgradeState: a state the Python provider wrote (version 1: jsonencode strings) reads
// as the typed blocks, the target's type its block's name, a per-partition start its own attribute.
func TestPipelineUpgradeState(t *testing.T) {
	ctx := context.Background()
	server, err := testProviders["inlet"]()
	if err != nil {
		t.Fatal(err)
	}
	old, _ := json.Marshal(map[string]any{
		"id": "p-1", "name": "orders", "state": "paused", "target_uri": "s3://bucket/t/bronze/orders", "etag": `"e"`,
		"source":   `{"connection_id":"c-1","starting_offsets":{"orders":{"0":5}},"topics":["orders"],"value_schema":{"version":3}}`,
		"target":   `{"path":"bronze/orders","type":"delta","maintenance":{"vacuum":{"retention_hours":240}}}`,
		"schedule": `{"interval_seconds":300}`,
	})
	resp, err := server.UpgradeResourceState(ctx, &tfprotov6.UpgradeResourceStateRequest{
		TypeName: "inlet_pipeline", Version: 1, RawState: &tfprotov6.RawState{JSON: old},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Errorf("%s: %s", d.Summary, d.Detail)
	}
	if resp.UpgradedState == nil {
		t.Fatal("no upgraded state")
	}
	value, err := resp.UpgradedState.Unmarshal(pipelineSchema().Type().TerraformType(ctx))
	if err != nil {
		t.Fatal(err)
	}
	var model map[string]any
	raw, _ := json.Marshal(tfValueJSON(t, value))
	_ = json.Unmarshal(raw, &model)
	source := model["source"].(map[string]any)
	target := model["target"].(map[string]any)
	checks := map[string][2]any{
		"source.connection_id":              {source["connection_id"], "c-1"},
		"source.starting_partition_offsets": {jsonText(source["starting_partition_offsets"]), `{"orders":{"0":5}}`},
		"source.starting_offsets":           {source["starting_offsets"], nil},
		"source.value_schema.version":       {source["value_schema"].(map[string]any)["version"], "3"},
		"target.kafka":                      {target["kafka"], nil},
		"target.delta.path":                 {target["delta"].(map[string]any)["path"], "bronze/orders"},
		"schedule.interval_seconds":         {jsonText(model["schedule"].(map[string]any)["interval_seconds"]), "300"},
		"contract":                          {model["contract"], nil},
		"target_uri":                        {model["target_uri"], "s3://bucket/t/bronze/orders"},
		"etag":                              {model["etag"], `"e"`},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %v, want %v", name, c[0], c[1])
		}
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// tfValueJSON is v as plain Go values: objects and maps as maps, lists as slices, numbers as
// json.Number, null as nil.
func tfValueJSON(t *testing.T, v tftypes.Value) any {
	t.Helper()
	if v.IsNull() {
		return nil
	}
	switch ty := v.Type(); {
	case ty.Is(tftypes.String):
		var s string
		_ = v.As(&s)
		return s
	case ty.Is(tftypes.Bool):
		var b bool
		_ = v.As(&b)
		return b
	case ty.Is(tftypes.Number):
		var f big.Float
		_ = v.As(&f)
		return json.Number(f.Text('f', -1))
	case ty.Is(tftypes.List{}), ty.Is(tftypes.Set{}):
		var items []tftypes.Value
		_ = v.As(&items)
		out := make([]any, 0, len(items))
		for _, item := range items {
			out = append(out, tfValueJSON(t, item))
		}
		return out
	default: // objects and maps
		var fields map[string]tftypes.Value
		if err := v.As(&fields); err != nil {
			t.Fatalf("%s: %v", ty, err)
		}
		out := make(map[string]any, len(fields))
		for name, field := range fields {
			out[name] = tfValueJSON(t, field)
		}
		return out
	}
}

// TestPythonProviderStatesRead: inlet_api_key's and inlet_pipeline_offsets' states from the Python
// provider 0.1 (version 1, the same attributes) read as they are.
func TestPythonProviderStatesRead(t *testing.T) {
	ctx := context.Background()
	server, err := testProviders["inlet"]()
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]map[string]any{
		"inlet_api_key": {"id": "k-1", "name": "dashboards", "role": "viewer", "prefix": "inl_ab",
			"key": "inl_secret", "created_at": "2026-11-01T00:00:00Z"},
		"inlet_pipeline_offsets": {"id": "p-1", "pipeline_id": "p-1", "offsets": map[string]any{"orders:0": 5},
			"reset": nil, "to_timestamp": nil, "topics": nil, "replay_mode": "append", "clamp": nil,
			"committed": map[string]any{"orders:0": 5}},
	}
	for typeName, state := range states {
		raw, _ := json.Marshal(state)
		resp, err := server.UpgradeResourceState(ctx, &tfprotov6.UpgradeResourceStateRequest{
			TypeName: typeName, Version: 1, RawState: &tfprotov6.RawState{JSON: raw},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range resp.Diagnostics {
			t.Errorf("%s: %s: %s", typeName, d.Summary, d.Detail)
		}
		if resp.UpgradedState == nil {
			t.Errorf("%s: no state", typeName)
		}
	}
}
