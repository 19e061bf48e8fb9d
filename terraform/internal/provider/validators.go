package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
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
