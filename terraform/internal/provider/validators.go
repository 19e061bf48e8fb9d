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

// uniqueNames refuses a list of objects in which two share a name, in any case (Inlet's rule); the
// error is at the second's name. A name not known yet (from another resource) is Inlet's to check.
func uniqueNames() validator.List { return uniqueNamesValidator{} }

type uniqueNamesValidator struct{}

func (uniqueNamesValidator) Description(context.Context) string {
	return "names must be unique in the list, in any case"
}

func (v uniqueNamesValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v uniqueNamesValidator) ValidateList(_ context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	first := map[string]int{}
	for i, element := range req.ConfigValue.Elements() {
		object, ok := element.(types.Object)
		if !ok || object.IsNull() || object.IsUnknown() {
			continue
		}
		name, ok := object.Attributes()["name"].(types.String)
		if !ok || name.IsNull() || name.IsUnknown() {
			continue
		}
		at := req.Path.AtListIndex(i).AtName("name")
		key := strings.ToLower(name.ValueString())
		if j, seen := first[key]; seen {
			resp.Diagnostics.AddAttributeError(at, "Duplicate name",
				fmt.Sprintf("%s: %s is already the name of %s; names are unique in %s, in any case.",
					at, name, req.Path.AtListIndex(j), req.Path))
			continue
		}
		first[key] = i
	}
}
