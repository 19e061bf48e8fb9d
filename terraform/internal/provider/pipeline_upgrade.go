package provider

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// A state written by the Python provider (version 1) held source, target and schedule as the
// jsonencode strings of the configuration; they become the typed attributes. The configuration
// changes with it: `source = jsonencode({ … })` becomes `source = { … }` (docs/terraform.md).

type pipelineModelV1 struct {
	ID        types.String `tfsdk:"id"`
	Name      types.String `tfsdk:"name"`
	Source    types.String `tfsdk:"source"`
	Target    types.String `tfsdk:"target"`
	Schedule  types.String `tfsdk:"schedule"`
	State     types.String `tfsdk:"state"`
	TargetURI types.String `tfsdk:"target_uri"`
	ETag      types.String `tfsdk:"etag"`
}

func (r *pipelineResource) UpgradeState(context.Context) map[int64]resource.StateUpgrader {
	text := func() schema.StringAttribute { return schema.StringAttribute{Optional: true} }
	return map[int64]resource.StateUpgrader{
		1: {
			PriorSchema: &schema.Schema{Attributes: map[string]schema.Attribute{
				"id": text(), "name": text(), "source": text(), "target": text(), "schedule": text(),
				"state": text(), "target_uri": text(), "etag": text(),
			}},
			StateUpgrader: func(ctx context.Context, req resource.UpgradeStateRequest, resp *resource.UpgradeStateResponse) {
				var old pipelineModelV1
				resp.Diagnostics.Append(req.State.Get(ctx, &old)...)
				if resp.Diagnostics.HasError() {
					return
				}
				document := func(value types.String) json.RawMessage {
					if value.IsNull() {
						return json.RawMessage("null")
					}
					return json.RawMessage(value.ValueString())
				}
				body, err := json.Marshal(map[string]any{
					"id": old.ID.ValueString(), "name": old.Name.ValueString(), "state": old.State.ValueString(),
					"source": document(old.Source), "target": document(old.Target), "schedule": document(old.Schedule),
					"status": map[string]any{"target_uri": old.TargetURI.ValueStringPointer()},
				})
				if err != nil {
					resp.Diagnostics.AddError("The pipeline's old state could not be read", err.Error())
					return
				}
				attrs := pipelineSchema().Attributes
				model, err := pipelineFromAnswer(ctx, body, old.ETag.ValueString(), pipelineModel{
					Source: types.ObjectNull(attrs["source"].GetType().(types.ObjectType).AttrTypes)})
				if err != nil {
					resp.Diagnostics.AddError("The pipeline's old state could not be upgraded", err.Error())
					return
				}
				resp.Diagnostics.Append(resp.State.Set(ctx, model)...)
			},
		},
	}
}
