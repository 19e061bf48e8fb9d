package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// A pipeline's contract at plan, as the provider's server checks a configuration: what Inlet would
// refuse and needs nothing but the configuration is an error at the attribute's path.

// TestPipelineContractRefusedAtPlan: what Inlet would refuse and needs nothing but the configuration
// is an error at plan, at the attribute's path.
func TestPipelineContractRefusedAtPlan(t *testing.T) {
	ctx := context.Background()
	server, err := testProviders["inlet"]()
	if err != nil {
		t.Fatal(err)
	}
	rule := func(name, fields string) string {
		return fmt.Sprintf(`{"name": %q, "predicate": "amount > 0"%s}`, name, fields)
	}
	many := make([]string, 51)
	for i := range many {
		many[i] = rule(fmt.Sprintf("r%d", i), "")
	}
	under := func(list string) func(steps ...any) *tftypes.AttributePath {
		return func(steps ...any) *tftypes.AttributePath {
			p := tftypes.NewAttributePath().WithAttributeName("contract").WithAttributeName(list)
			for _, step := range steps {
				switch s := step.(type) {
				case int:
					p = p.WithElementKeyInt(s)
				case string:
					p = p.WithAttributeName(s)
				}
			}
			return p
		}
	}
	at, atField, evolution := under("expectations"), under("sensitive"), under("evolution")
	long := strings.Repeat("é", 2000) // 2000 characters, 4000 bytes: Inlet counts characters
	sensitive := func(fields ...string) string {
		entries := make([]string, 0, len(fields)/2)
		for i := 0; i < len(fields); i += 2 {
			entries = append(entries, fmt.Sprintf(`{"field": %q, "action": %q}`, fields[i], fields[i+1]))
		}
		return `{"sensitive": [` + strings.Join(entries, ",") + `]}`
	}
	hundred := make([]string, 0, 202)
	for i := range 101 {
		hundred = append(hundred, fmt.Sprintf("f%d", i), "hash")
	}
	name128 := "n" + strings.Repeat("a", 127)
	deep := strings.TrimSuffix(strings.Repeat("s.", 16), ".") // 16 names
	const pathDetail = "must be a column or a field of a struct, dotted"
	const dropDetail = "drop takes a top-level column; hash or redact a field of a struct"
	cases := map[string]struct {
		rules  string
		path   *tftypes.AttributePath // nil: accepted
		detail string
	}{
		"two rules":             {rules: twoRules},
		"no rules":              {rules: `{"expectations": []}`},
		"no expectations":       {rules: `{}`},
		"fifty rules":           {rules: `{"expectations": [` + strings.Join(many[:50], ",") + `]}`},
		"a ratio of 1":          {rules: `{"expectations": [` + rule("r", `, "alert_over_ratio": 1`) + `]}`},
		"2000 characters":       {rules: `{"expectations": [{"name": "r", "predicate": "` + long + `"}]}`},
		"fifty-one rules":       {`{"expectations": [` + strings.Join(many, ",") + `]}`, at(), "at most 50"},
		"a name with a space":   {`{"expectations": [` + rule("a b", "") + `]}`, at(0, "name"), "must start with a letter or _"},
		"a name with a digit":   {`{"expectations": [` + rule("1st", "") + `]}`, at(0, "name"), "must start with a letter or _"},
		"a name of 65":          {`{"expectations": [` + rule("n"+strings.Repeat("a", 64), "") + `]}`, at(0, "name"), "up to 63"},
		"a name twice":          {`{"expectations": [` + rule("a", "") + "," + rule("b", "") + "," + rule("A", "") + `]}`, at(2, "name"), `contract.expectations[2].name: "A" is already the name of contract.expectations[0]`},
		"an unknown action":     {`{"expectations": [` + rule("r", `, "action": "drop"`) + `]}`, at(0, "action"), `value must be one of: ["warn" "quarantine" "fail"]`},
		"an empty predicate":    {`{"expectations": [{"name": "r", "predicate": ""}]}`, at(0, "predicate"), "between 1 and 2000"},
		"2001 characters":       {`{"expectations": [{"name": "r", "predicate": "é` + long + `"}]}`, at(0, "predicate"), "between 1 and 2000"},
		"no rows":               {`{"expectations": [` + rule("r", `, "alert_over_rows": 0`) + `]}`, at(0, "alert_over_rows"), "value must be between 1 and"},
		"a ratio of 0":          {`{"expectations": [` + rule("r", `, "alert_over_ratio": 0`) + `]}`, at(0, "alert_over_ratio"), "must be greater than 0"},
		"a ratio below 0":       {`{"expectations": [` + rule("r", `, "alert_over_ratio": -0.5`) + `]}`, at(0, "alert_over_ratio"), "must be greater than 0"},
		"a ratio over 1":        {`{"expectations": [` + rule("r", `, "alert_over_ratio": 1.5`) + `]}`, at(0, "alert_over_ratio"), "must be at most 1"},
		"the second rule's bad": {`{"expectations": [` + rule("r", "") + "," + rule("s", `, "action": "stop"`) + `]}`, at(1, "action"), "value must be one of"},

		"evolution add":             {rules: `{"evolution": "add"}`},
		"evolution widen":           {rules: `{"evolution": "widen", "expectations": [` + rule("r", "") + `]}`},
		"evolution fail":            {rules: `{"evolution": "fail"}`},
		"an unknown evolution":      {`{"evolution": "drop"}`, evolution(), `value must be one of: ["add" "widen" "fail"]`},
		"an evolution in capitals":  {`{"evolution": "WIDEN"}`, evolution(), "value must be one of"},
		"an empty evolution":        {`{"evolution": ""}`, evolution(), "value must be one of"},
		"a bad evolution and rules": {`{"evolution": "merge", "expectations": [` + rule("r", "") + `]}`, evolution(), "value must be one of"},

		"sensitive fields":            {rules: protected},
		"no sensitive fields":         {rules: `{"sensitive": []}`},
		"a hundred fields":            {rules: sensitive(hundred[:200]...)},
		"a name of 128":               {rules: sensitive(name128+"."+name128, "hash")},
		"16 names":                    {rules: sensitive(deep, "redact")},
		"a column dropped":            {rules: sensitive("_notes", "drop")},
		"a hundred and one fields":    {sensitive(hundred...), atField(), "at most 100"},
		"a field with a space":        {sensitive("e mail", "hash"), atField(0, "field"), pathDetail},
		"a field with a digit first":  {sensitive("customer.1st", "hash"), atField(0, "field"), pathDetail},
		"a field with a dash":         {sensitive("e-mail", "hash"), atField(0, "field"), pathDetail},
		"an empty field":              {sensitive("", "hash"), atField(0, "field"), pathDetail},
		"an empty name":               {sensitive("customer..ssn", "hash"), atField(0, "field"), pathDetail},
		"a trailing dot":              {sensitive("customer.", "hash"), atField(0, "field"), pathDetail},
		"a name of 129":               {sensitive("customer."+name128+"a", "hash"), atField(0, "field"), pathDetail},
		"17 names":                    {sensitive(deep+".s", "hash"), atField(0, "field"), pathDetail},
		"a field twice":               {sensitive("email", "hash", "notes", "drop", "Email", "redact"), atField(2, "field"), `contract.sensitive[2].field: "Email" is already the field of contract.sensitive[0]`},
		"a struct's field twice":      {sensitive("customer.ssn", "hash", "CUSTOMER.SSN", "hash"), atField(1, "field"), "fields are unique in contract.sensitive, in any case"},
		"an unknown sensitive action": {sensitive("email", "mask"), atField(0, "action"), `value must be one of: ["hash" "redact" "drop"]`},
		"an action in capitals":       {sensitive("email", "HASH"), atField(0, "action"), "value must be one of"},
		"a struct's field dropped":    {sensitive("customer.ssn", "drop"), atField(0, "field"), dropDetail},
		"the second field's dropped":  {sensitive("email", "hash", "customer.ssn", "drop"), atField(1, "field"), `contract.sensitive[1].field: ` + dropDetail + `; got "customer.ssn"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			config := pipelineValue(t, `{"name": "orders", "source": `+contractSource+`,
				"target": {"delta": {"path": "bronze/orders"}}, "contract": `+c.rules+`}`)
			raw, err := config.ToTerraformValue(ctx)
			if err != nil {
				t.Fatal(err)
			}
			value, err := tfprotov6.NewDynamicValue(pipelineSchema().Type().TerraformType(ctx), raw)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := server.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{
				TypeName: "inlet_pipeline", Config: &value})
			if err != nil {
				t.Fatal(err)
			}
			if c.path == nil {
				for _, d := range resp.Diagnostics {
					t.Errorf("refused: %s: %s (at %s)", d.Summary, d.Detail, d.Attribute)
				}
				return
			}
			if len(resp.Diagnostics) != 1 {
				t.Fatalf("%d diagnostics, want 1: %v", len(resp.Diagnostics), resp.Diagnostics)
			}
			d := resp.Diagnostics[0]
			if d.Severity != tfprotov6.DiagnosticSeverityError || !d.Attribute.Equal(c.path) || !strings.Contains(d.Detail, c.detail) {
				t.Errorf("got %s at %s: %q\nwant an error at %s saying %q", d.Summary, d.Attribute, d.Detail, c.path, c.detail)
			}
		})
	}
}

// TestPipelineContractEvolutionPlanned: a contract that leaves evolution out plans Inlet's default,
// add (sent, and read back so); one that sets it plans it as written; no contract plans none.
func TestPipelineContractEvolutionPlanned(t *testing.T) {
	ctx := context.Background()
	server, err := testProviders["inlet"]()
	if err != nil {
		t.Fatal(err)
	}
	schemaType := pipelineSchema().Type().TerraformType(ctx)
	for name, c := range map[string]struct {
		contract string // "": none
		want     any    // the planned contract.evolution; nil: no contract
	}{
		"left out":       {twoRules, "add"},
		"an empty one":   {`{}`, "add"},
		"widen":          {`{"evolution": "widen"}`, "widen"},
		"fail":           {`{"evolution": "fail", "sensitive": [{"field": "email", "action": "hash"}]}`, "fail"},
		"add as written": {`{"evolution": "add"}`, "add"},
		"no contract":    {"", nil},
	} {
		t.Run(name, func(t *testing.T) {
			document := `{"name": "orders", "source": ` + contractSource + `, "target": {"delta": {"path": "b"}}`
			if c.contract != "" {
				document += `, "contract": ` + c.contract
			}
			raw, err := pipelineValue(t, document+"}").ToTerraformValue(ctx)
			if err != nil {
				t.Fatal(err)
			}
			config, err := tfprotov6.NewDynamicValue(schemaType, raw)
			if err != nil {
				t.Fatal(err)
			}
			prior, err := tfprotov6.NewDynamicValue(schemaType, tftypes.NewValue(schemaType, nil))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := server.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{
				TypeName: "inlet_pipeline", Config: &config, ProposedNewState: &config, PriorState: &prior})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range resp.Diagnostics {
				t.Fatalf("%s: %s (at %s)", d.Summary, d.Detail, d.Attribute)
			}
			planned, err := resp.PlannedState.Unmarshal(schemaType)
			if err != nil {
				t.Fatal(err)
			}
			contract, _ := tfValueJSON(t, planned).(map[string]any)["contract"].(map[string]any)
			if c.want == nil {
				if contract != nil {
					t.Errorf("contract = %v, want none", contract)
				}
				return
			}
			if contract["evolution"] != c.want {
				t.Errorf("contract.evolution = %v, want %v", contract["evolution"], c.want)
			}
		})
	}
}

// TestUniqueNamesLeavesUnknownsToInlet: a name not known at plan (another resource's) is not compared.
func TestUniqueNamesLeavesUnknownsToInlet(t *testing.T) {
	ctx := context.Background()
	ruleType := pipelineSchema().Attributes["contract"].GetType().(types.ObjectType).AttrTypes["expectations"].(types.ListType).ElemType.(types.ObjectType)
	rule := func(name types.String) attr.Value {
		fields := map[string]attr.Value{}
		for field, t := range ruleType.AttrTypes {
			fields[field] = nullOf(t)
		}
		fields["name"] = name
		return types.ObjectValueMust(ruleType.AttrTypes, fields)
	}
	rules := types.ListValueMust(ruleType, []attr.Value{rule(types.StringUnknown()), rule(types.StringUnknown()),
		types.ObjectUnknown(ruleType.AttrTypes), rule(types.StringValue("a"))})
	var resp validator.ListResponse
	uniqueNames().ValidateList(ctx, validator.ListRequest{Path: path.Root("contract").AtName("expectations"),
		ConfigValue: rules}, &resp)
	if resp.Diagnostics.HasError() {
		t.Errorf("refused: %v", resp.Diagnostics)
	}
}

// TestSensitiveFieldsLeaveUnknownsToInlet: a field or an action not known at plan (another
// resource's) is neither compared nor checked for a drop; a known one still is.
func TestSensitiveFieldsLeaveUnknownsToInlet(t *testing.T) {
	ctx := context.Background()
	fieldType := pipelineSchema().Attributes["contract"].GetType().(types.ObjectType).AttrTypes["sensitive"].(types.ListType).ElemType.(types.ObjectType)
	entry := func(field, action types.String) types.Object {
		return types.ObjectValueMust(fieldType.AttrTypes, map[string]attr.Value{"field": field, "action": action})
	}
	at := path.Root("contract").AtName("sensitive")
	fields := types.ListValueMust(fieldType, []attr.Value{entry(types.StringUnknown(), types.StringValue("hash")),
		entry(types.StringUnknown(), types.StringValue("hash")), types.ObjectUnknown(fieldType.AttrTypes),
		entry(types.StringValue("a"), types.StringUnknown())})
	var list validator.ListResponse
	uniqueFields().ValidateList(ctx, validator.ListRequest{Path: at, ConfigValue: fields}, &list)
	if list.Diagnostics.HasError() {
		t.Errorf("refused: %v", list.Diagnostics)
	}
	for name, c := range map[string]struct {
		value   types.Object
		refused bool
	}{
		"an unknown action":     {entry(types.StringValue("customer.ssn"), types.StringUnknown()), false},
		"an unknown field":      {entry(types.StringUnknown(), types.StringValue("drop")), false},
		"an unknown entry":      {types.ObjectUnknown(fieldType.AttrTypes), false},
		"a known drop":          {entry(types.StringValue("customer.ssn"), types.StringValue("drop")), true},
		"a known column drop":   {entry(types.StringValue("ssn"), types.StringValue("drop")), false},
		"a known struct's hash": {entry(types.StringValue("customer.ssn"), types.StringValue("hash")), false},
	} {
		t.Run(name, func(t *testing.T) {
			var resp validator.ObjectResponse
			topLevelDrop().ValidateObject(ctx, validator.ObjectRequest{Path: at.AtListIndex(0), ConfigValue: c.value}, &resp)
			if resp.Diagnostics.HasError() != c.refused {
				t.Errorf("refused %t, want %t: %v", resp.Diagnostics.HasError(), c.refused, resp.Diagnostics)
			}
		})
	}
}
