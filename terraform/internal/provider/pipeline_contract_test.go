package provider

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
)

// A pipeline's contract without Inlet or a CLI: its conversion both ways, the state before contracts,
// and the data source's type (its rules at plan: pipeline_contract_plan_test.go).

const contractSource = `{"connection_id": "c-1", "topics": ["orders"], "value_format": "json",
	"schema": "id BIGINT, amount DOUBLE"}`

// The contract of docs/terraform.md: a rule with every field, and one with its name and predicate only.
const twoRules = `{"expectations": [
	{"name": "positive_amount", "predicate": "amount > 0", "action": "quarantine",
	 "alert_over_rows": 100, "alert_over_ratio": 0.01},
	{"name": "has_id", "predicate": "id IS NOT NULL"}]}`

// The sensitive fields of docs/terraform.md's kind, one of each action, beside the two rules.
const protected = `{"expectations": [{"name": "has_id", "predicate": "id IS NOT NULL"}],
	"sensitive": [{"field": "email", "action": "hash"}, {"field": "customer.ssn", "action": "redact"},
		{"field": "notes", "action": "drop"}]}`

// withEvolution is the contract document with evolution set to policy, as a plan holds it (the
// attribute's default, add, where the configuration leaves it out) and Inlet then returns it.
func withEvolution(t *testing.T, contract, policy string) string {
	t.Helper()
	var fields map[string]any
	if err := json.Unmarshal([]byte(contract), &fields); err != nil {
		t.Fatalf("%v in %s", err, contract)
	}
	fields["evolution"] = policy
	out, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// pipelineValue is the inlet_pipeline object that document describes (attributes it leaves out null),
// as a configuration or a plan would hold it.
func pipelineValue(t *testing.T, document string) types.Object {
	t.Helper()
	raw, err := decodeJSON([]byte(document))
	if err != nil {
		t.Fatalf("%v in %s", err, document)
	}
	value, err := fromJSON(context.Background(), raw, pipelineSchema().Type())
	if err != nil {
		t.Fatal(err)
	}
	return value.(types.Object)
}

func pipelineOf(t *testing.T, document string) pipelineModel {
	t.Helper()
	var model pipelineModel
	if d := pipelineValue(t, document).As(context.Background(), &model, basetypes.ObjectAsOptions{}); d.HasError() {
		t.Fatal(d)
	}
	return model
}

// canonical is a JSON document with its keys sorted and no spaces, to compare two as text.
func canonical(t *testing.T, document any) string {
	t.Helper()
	if text, ok := document.(string); ok {
		if err := json.Unmarshal([]byte(text), &document); err != nil {
			t.Fatalf("%v in %s", err, text)
		}
	}
	out, err := json.Marshal(document)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestPipelineContractBody: a contract goes out as written, fields left out left out (one without
// sensitive fields sends none, as before them); a pipeline without one goes out as before contracts,
// with no contract field at all.
func TestPipelineContractBody(t *testing.T) {
	cases := map[string]struct{ config, body string }{
		"two rules": {
			config: `{"name": "orders", "state": "active", "source": ` + contractSource + `,
				"target": {"delta": {"path": "bronze/orders"}}, "contract": ` + twoRules + `}`,
			body: `{"name": "orders", "state": "active", "source": ` + contractSource + `, "schedule": null,
				"target": {"type": "delta", "path": "bronze/orders"}, "contract": ` + twoRules + `}`,
		},
		"no contract": {
			config: `{"name": "orders", "state": "paused", "source": ` + contractSource + `,
				"target": {"delta": {"path": "bronze/orders"}}, "schedule": {"interval_seconds": 60}}`,
			body: `{"name": "orders", "state": "paused", "source": ` + contractSource + `,
				"schedule": {"interval_seconds": 60}, "target": {"type": "delta", "path": "bronze/orders"}}`,
		},
		"an empty contract": {
			config: `{"name": "orders", "source": ` + contractSource + `, "target": {"delta": {"path": "b"}},
				"contract": {}}`,
			body: `{"name": "orders", "source": ` + contractSource + `, "schedule": null,
				"target": {"type": "delta", "path": "b"}, "contract": {}}`,
		},
		"sensitive fields": {
			config: `{"name": "orders", "source": ` + contractSource + `, "target": {"delta": {"path": "b"}},
				"contract": ` + protected + `}`,
			body: `{"name": "orders", "source": ` + contractSource + `, "schedule": null,
				"target": {"type": "delta", "path": "b"}, "contract": ` + protected + `}`,
		},
		"no sensitive fields": {
			config: `{"name": "orders", "source": ` + contractSource + `, "target": {"delta": {"path": "b"}},
				"contract": {"sensitive": []}}`,
			body: `{"name": "orders", "source": ` + contractSource + `, "schedule": null,
				"target": {"type": "delta", "path": "b"}, "contract": {"sensitive": []}}`,
		},
		"no rules": {
			config: `{"name": "orders", "source": ` + contractSource + `, "target": {"delta": {"path": "b"}},
				"contract": {"expectations": []}}`,
			body: `{"name": "orders", "source": ` + contractSource + `, "schedule": null,
				"target": {"type": "delta", "path": "b"}, "contract": {"expectations": []}}`,
		},
		"an evolution policy": {
			config: `{"name": "orders", "source": ` + contractSource + `, "target": {"delta": {"path": "b"}},
				"contract": {"evolution": "widen", "sensitive": [{"field": "email", "action": "hash"}]}}`,
			body: `{"name": "orders", "source": ` + contractSource + `, "schedule": null,
				"target": {"type": "delta", "path": "b"},
				"contract": {"evolution": "widen", "sensitive": [{"field": "email", "action": "hash"}]}}`,
		},
		"the default policy, as planned": {
			config: `{"name": "orders", "source": ` + contractSource + `, "target": {"delta": {"path": "b"}},
				"contract": {"evolution": "add"}}`,
			body: `{"name": "orders", "source": ` + contractSource + `, "schedule": null,
				"target": {"type": "delta", "path": "b"}, "contract": {"evolution": "add"}}`,
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got, want := canonical(t, pipelineBody(pipelineOf(t, c.config))), canonical(t, c.body); got != want {
				t.Errorf("body\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestPipelineContractFromAnswer: Inlet's contract reads as the configuration that wrote it, and goes
// out again unchanged (one without sensitive fields reads them as null); one without evolution
// (written before it, or without it through the API or the portal) reads as add, its default, as
// the configuration plans it; an answer with no contract (null, or none at all: an Inlet before
// contracts) reads as null.
func TestPipelineContractFromAnswer(t *testing.T) {
	ctx := context.Background()
	answer := func(contract string) []byte {
		body := `{"id": "p-1", "name": "orders", "state": "active", "source": ` + contractSource + `,
			"target": {"type": "delta", "path": "bronze/orders"}, "schedule": null,
			"status": {"target_uri": "s3://b/t/bronze/orders", "next_run_at": null}`
		if contract != "" {
			body += `, "contract": ` + contract
		}
		return []byte(body + "}")
	}
	nullSource := types.ObjectNull(pipelineSchema().Attributes["source"].GetType().(types.ObjectType).AttrTypes)
	read := func(t *testing.T, contract string) pipelineModel {
		t.Helper()
		model, err := pipelineFromAnswer(ctx, answer(contract), `"e"`, pipelineModel{Source: nullSource})
		if err != nil {
			t.Fatal(err)
		}
		return model
	}

	t.Run("two rules", func(t *testing.T) {
		model := read(t, withEvolution(t, twoRules, "add"))
		written := pipelineOf(t, `{"contract": `+withEvolution(t, twoRules, "add")+`}`).Contract
		if !model.Contract.Equal(written) {
			t.Errorf("contract\n got %s\nwant %s", model.Contract, written)
		}
		rules := model.Contract.Attributes()["expectations"].(types.List).Elements()
		second := rules[1].(types.Object).Attributes()
		for _, field := range []string{"action", "alert_over_rows", "alert_over_ratio"} {
			if !second[field].IsNull() {
				t.Errorf("expectations[1].%s = %s, want null (left out)", field, second[field])
			}
		}
		if ratio := rules[0].(types.Object).Attributes()["alert_over_ratio"]; !ratio.Equal(types.Float64Value(0.01)) {
			t.Errorf("expectations[0].alert_over_ratio = %s, want 0.01", ratio)
		}
		if sensitive := model.Contract.Attributes()["sensitive"]; !sensitive.IsNull() {
			t.Errorf("sensitive = %s, want null (left out)", sensitive)
		}
		if got, want := canonical(t, pipelineBody(model)["contract"]), canonical(t, withEvolution(t, twoRules, "add")); got != want {
			t.Errorf("sent again\n got %s\nwant %s", got, want)
		}
	})
	t.Run("sensitive fields", func(t *testing.T) {
		model := read(t, withEvolution(t, protected, "fail"))
		written := pipelineOf(t, `{"contract": `+withEvolution(t, protected, "fail")+`}`).Contract
		if !model.Contract.Equal(written) {
			t.Errorf("contract\n got %s\nwant %s", model.Contract, written)
		}
		fields := model.Contract.Attributes()["sensitive"].(types.List).Elements()
		if len(fields) != 3 {
			t.Fatalf("sensitive = %s, want 3 fields", fields)
		}
		second := fields[1].(types.Object).Attributes()
		if !second["field"].Equal(types.StringValue("customer.ssn")) || !second["action"].Equal(types.StringValue("redact")) {
			t.Errorf("sensitive[1] = %s, want customer.ssn redacted", fields[1])
		}
		if got, want := canonical(t, pipelineBody(model)["contract"]), canonical(t, withEvolution(t, protected, "fail")); got != want {
			t.Errorf("sent again\n got %s\nwant %s", got, want)
		}
	})
	t.Run("an empty contract", func(t *testing.T) {
		model := read(t, `{}`)
		if model.Contract.IsNull() || !model.Contract.Attributes()["expectations"].IsNull() {
			t.Errorf("contract = %s, want an object without expectations", model.Contract)
		}
		if evolution := model.Contract.Attributes()["evolution"]; !evolution.Equal(types.StringValue("add")) {
			t.Errorf("evolution = %s, want add (the default)", evolution)
		}
	})
	for _, policy := range []string{"add", "widen", "fail"} {
		t.Run("evolution "+policy, func(t *testing.T) {
			contract := withEvolution(t, twoRules, policy)
			model := read(t, contract)
			if evolution := model.Contract.Attributes()["evolution"]; !evolution.Equal(types.StringValue(policy)) {
				t.Errorf("evolution = %s, want %s", evolution, policy)
			}
			if written := pipelineOf(t, `{"contract": `+contract+`}`).Contract; !model.Contract.Equal(written) {
				t.Errorf("contract\n got %s\nwant %s", model.Contract, written)
			}
			if got, want := canonical(t, pipelineBody(model)["contract"]), canonical(t, contract); got != want {
				t.Errorf("sent again\n got %s\nwant %s", got, want)
			}
		})
	}
	for name, contract := range map[string]string{
		"evolution left out": twoRules,
		"evolution null":     strings.Replace(twoRules, "{", `{"evolution": null, `, 1),
	} {
		t.Run(name, func(t *testing.T) {
			model := read(t, contract)
			if evolution := model.Contract.Attributes()["evolution"]; !evolution.Equal(types.StringValue("add")) {
				t.Errorf("evolution = %s, want add: what Inlet applies, and what a configuration without it plans", evolution)
			}
			if rules := model.Contract.Attributes()["expectations"].(types.List).Elements(); len(rules) != 2 {
				t.Errorf("expectations = %s, want the two rules", rules)
			}
		})
	}
	for name, contract := range map[string]string{"null": "null", "left out": ""} {
		t.Run(name, func(t *testing.T) {
			model := read(t, contract)
			if !model.Contract.IsNull() {
				t.Errorf("contract = %s, want null", model.Contract)
			}
			if _, sent := pipelineBody(model)["contract"]; sent {
				t.Error("a pipeline without a contract sends one")
			}
		})
	}
}

// TestPipelineStateBeforeContracts: a state written before contracts (version 2, no contract) reads
// as it is, its contract null: no state upgrade.
func TestPipelineStateBeforeContracts(t *testing.T) {
	state := stateOfVersion2(t, map[string]any{
		"id": "p-1", "name": "orders", "state": "active", "target_uri": nil, "etag": `"e"`, "schedule": nil,
		"source": map[string]any{"connection_id": "c-1", "topics": []string{"orders"}},
		"target": map[string]any{"delta": map[string]any{"path": "bronze/orders"}},
	})
	if _, held := state["contract"]; !held || state["contract"] != nil {
		t.Errorf("contract = %v, want null", state["contract"])
	}
	if state["target"].(map[string]any)["delta"].(map[string]any)["path"] != "bronze/orders" {
		t.Errorf("target = %v", state["target"])
	}
}

// TestPipelineStateBeforeSensitiveFields: a contract in a state written before sensitive fields reads
// as it is, its sensitive null: no state upgrade.
func TestPipelineStateBeforeSensitiveFields(t *testing.T) {
	rule := map[string]any{"name": "has_id", "predicate": "id IS NOT NULL", "action": nil,
		"alert_over_rows": nil, "alert_over_ratio": nil}
	state := stateOfVersion2(t, map[string]any{
		"id": "p-1", "name": "orders", "state": "active", "target_uri": nil, "etag": `"e"`, "schedule": nil,
		"source":   map[string]any{"connection_id": "c-1", "topics": []string{"orders"}},
		"target":   map[string]any{"delta": map[string]any{"path": "bronze/orders"}},
		"contract": map[string]any{"expectations": []any{rule}},
	})
	contract, _ := state["contract"].(map[string]any)
	if _, held := contract["sensitive"]; !held || contract["sensitive"] != nil {
		t.Errorf("contract = %v, want sensitive null", state["contract"])
	}
	if rules, _ := contract["expectations"].([]any); len(rules) != 1 || !reflect.DeepEqual(rules[0], rule) {
		t.Errorf("expectations = %v, want [%v]", contract["expectations"], rule)
	}
}

// TestPipelineStateBeforeEvolution: a contract in a state written before evolution reads as it is,
// its evolution null: no state upgrade (the next refresh reads add, what the configuration plans).
func TestPipelineStateBeforeEvolution(t *testing.T) {
	state := stateOfVersion2(t, map[string]any{
		"id": "p-1", "name": "orders", "state": "active", "target_uri": nil, "etag": `"e"`, "schedule": nil,
		"source":   map[string]any{"connection_id": "c-1", "topics": []string{"orders"}},
		"target":   map[string]any{"delta": map[string]any{"path": "bronze/orders"}},
		"contract": map[string]any{"sensitive": []any{map[string]any{"field": "email", "action": "hash"}}},
	})
	contract, _ := state["contract"].(map[string]any)
	if _, held := contract["evolution"]; !held || contract["evolution"] != nil {
		t.Errorf("contract = %v, want evolution null", state["contract"])
	}
	if fields, _ := contract["sensitive"].([]any); len(fields) != 1 {
		t.Errorf("sensitive = %v, want the one field", contract["sensitive"])
	}
}

// stateOfVersion2 is the state the provider reads from old, a version 2 state's JSON.
func stateOfVersion2(t *testing.T, old map[string]any) map[string]any {
	t.Helper()
	ctx := context.Background()
	server, err := testProviders["inlet"]()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(old)
	resp, err := server.UpgradeResourceState(ctx, &tfprotov6.UpgradeResourceStateRequest{
		TypeName: "inlet_pipeline", Version: 2, RawState: &tfprotov6.RawState{JSON: raw},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Errorf("%s: %s", d.Summary, d.Detail)
	}
	if resp.UpgradedState == nil {
		t.Fatal("no state")
	}
	value, err := resp.UpgradedState.Unmarshal(pipelineSchema().Type().TerraformType(ctx))
	if err != nil {
		t.Fatal(err)
	}
	return tfValueJSON(t, value).(map[string]any)
}

// TestPipelineDataSourceContract: the data source's contract has the resource's type, read only.
func TestPipelineDataSourceContract(t *testing.T) {
	var resp datasource.SchemaResponse
	newPipelineDataSource().Schema(context.Background(), datasource.SchemaRequest{}, &resp)
	contract, ok := resp.Schema.Attributes["contract"]
	if !ok {
		t.Fatal("no contract attribute")
	}
	if want := pipelineSchema().Attributes["contract"].GetType(); !contract.GetType().Equal(want) {
		t.Errorf("type %s, want %s", contract.GetType(), want)
	}
	if !contract.IsComputed() || contract.IsOptional() {
		t.Error("the data source's contract is not read only")
	}
	fields := contract.GetType().(types.ObjectType).AttrTypes["sensitive"]
	if want := (types.ListType{ElemType: types.ObjectType{AttrTypes: map[string]attr.Type{
		"field": types.StringType, "action": types.StringType}}}); !fields.Equal(want) {
		t.Errorf("sensitive: type %s, want %s", fields, want)
	}
	if evolution := contract.GetType().(types.ObjectType).AttrTypes["evolution"]; !evolution.Equal(types.StringType) {
		t.Errorf("evolution: type %s, want a string", evolution)
	}
}
