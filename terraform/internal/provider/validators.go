package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// rfc3339Time refuses a string that is not an RFC 3339 time with a zone (2026-01-31T12:00:00Z).
func rfc3339Time() validator.String { return rfc3339Validator{} }

type rfc3339Validator struct{}

func (rfc3339Validator) Description(context.Context) string {
	return "must be an RFC 3339 time with a zone, e.g. 2026-01-31T12:00:00Z"
}

func (v rfc3339Validator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v rfc3339Validator) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := time.Parse(time.RFC3339Nano, req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Not an RFC 3339 time",
			req.Path.String()+" "+v.Description(ctx)+"; got "+req.ConfigValue.String()+".")
	}
}

// aboveZero refuses a number that is not greater than 0 (float64validator's AtLeast and Between take
// their bound).
func aboveZero() validator.Float64 { return aboveZeroValidator{} }

type aboveZeroValidator struct{}

func (aboveZeroValidator) Description(context.Context) string { return "must be greater than 0" }

func (v aboveZeroValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v aboveZeroValidator) ValidateFloat64(ctx context.Context, req validator.Float64Request, resp *validator.Float64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if req.ConfigValue.ValueFloat64() <= 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Not greater than 0",
			req.Path.String()+" "+v.Description(ctx)+"; got "+req.ConfigValue.String()+".")
	}
}

// uniqueNames and uniqueFields refuse a list of objects in which two share a name (a field), in any
// case (Inlet's rule); the error is at the second's. A value not known yet (from another resource) is
// Inlet's to check.
func uniqueNames() validator.List { return uniqueValidator{attribute: "name"} }

func uniqueFields() validator.List { return uniqueValidator{attribute: "field"} }

type uniqueValidator struct{ attribute string }

func (v uniqueValidator) Description(context.Context) string {
	return v.attribute + "s must be unique in the list, in any case"
}

func (v uniqueValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v uniqueValidator) ValidateList(_ context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	first := map[string]int{}
	for i, element := range req.ConfigValue.Elements() {
		object, ok := element.(types.Object)
		if !ok || object.IsNull() || object.IsUnknown() {
			continue
		}
		value, ok := object.Attributes()[v.attribute].(types.String)
		if !ok || value.IsNull() || value.IsUnknown() {
			continue
		}
		at := req.Path.AtListIndex(i).AtName(v.attribute)
		key := strings.ToLower(value.ValueString())
		if j, seen := first[key]; seen {
			resp.Diagnostics.AddAttributeError(at, "Duplicate "+v.attribute,
				fmt.Sprintf("%s: %s is already the %s of %s; %ss are unique in %s, in any case.",
					at, value, v.attribute, req.Path.AtListIndex(j), v.attribute, req.Path))
			continue
		}
		first[key] = i
	}
}

// structField refuses a string that is not a column or a field of a struct column, dotted: Inlet's
// ^[A-Za-z_][A-Za-z0-9_]{0,127}(\.[A-Za-z_][A-Za-z0-9_]{0,127}){0,15}$, whose nested repetition is
// more than Go's regexp compiles, checked name by name.
func structField() validator.String { return structFieldValidator{} }

type structFieldValidator struct{}

func (structFieldValidator) Description(context.Context) string {
	return "must be a column or a field of a struct, dotted (customer.email): up to 16 names, each a letter " +
		"or _, then up to 127 letters, digits or _"
}

func (v structFieldValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v structFieldValidator) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	names := strings.Split(req.ConfigValue.ValueString(), ".")
	valid := len(names) <= 16
	for _, name := range names {
		valid = valid && columnName.MatchString(name)
	}
	if !valid {
		resp.Diagnostics.AddAttributeError(req.Path, "Not a field",
			req.Path.String()+" "+v.Description(ctx)+"; got "+req.ConfigValue.String()+".")
	}
}

// topLevelDrop refuses a sensitive field dropped that is a struct's field: Inlet drops columns only.
// The error is at the field, as Inlet's 422 is.
func topLevelDrop() validator.Object { return topLevelDropValidator{} }

type topLevelDropValidator struct{}

func (topLevelDropValidator) Description(context.Context) string {
	return "drop takes a top-level column; hash or redact a field of a struct"
}

func (v topLevelDropValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v topLevelDropValidator) ValidateObject(ctx context.Context, req validator.ObjectRequest, resp *validator.ObjectResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	field, _ := req.ConfigValue.Attributes()["field"].(types.String)
	action, _ := req.ConfigValue.Attributes()["action"].(types.String)
	if field.IsNull() || field.IsUnknown() || action.IsUnknown() || action.ValueString() != "drop" {
		return
	}
	if strings.Contains(field.ValueString(), ".") {
		at := req.Path.AtName("field")
		resp.Diagnostics.AddAttributeError(at, "A struct's field dropped",
			at.String()+": "+v.Description(ctx)+"; got "+field.String()+".")
	}
}
