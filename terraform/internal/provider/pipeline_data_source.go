package provider

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
)

// data "inlet_pipeline": a pipeline by id or by name, its source, target, schedule and contract typed
// as the resource's.

func newPipelineDataSource() datasource.DataSource { return &pipelineDataSource{} }

type pipelineDataSource struct{ withDataClient }

type pipelineDataModel struct {
	ID        types.String `tfsdk:"id"`
	Name      types.String `tfsdk:"name"`
	Source    types.Object `tfsdk:"source"`
	Target    types.Object `tfsdk:"target"`
	Schedule  types.Object `tfsdk:"schedule"`
	Contract  types.Object `tfsdk:"contract"`
	State     types.String `tfsdk:"state"`
	TargetURI types.String `tfsdk:"target_uri"`
	NextRunAt types.String `tfsdk:"next_run_at"`
}

func (d *pipelineDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pipeline"
}

func (d *pipelineDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	documents := pipelineSchema().Attributes
	resp.Schema = schema.Schema{
		Description: "A pipeline, by id or by name.",
		Attributes: map[string]schema.Attribute{
			"id":          schema.StringAttribute{Optional: true, Computed: true, Description: "The pipeline's id (or give name)."},
			"name":        schema.StringAttribute{Optional: true, Computed: true, Description: "The pipeline's name (or give id)."},
			"source":      computedAttribute(documents["source"].GetType(), "As inlet_pipeline's source."),
			"target":      computedAttribute(documents["target"].GetType(), "As inlet_pipeline's target."),
			"schedule":    computedAttribute(documents["schedule"].GetType(), "As inlet_pipeline's schedule; null without one."),
			"contract":    computedAttribute(documents["contract"].GetType(), "As inlet_pipeline's contract; null without one."),
			"state":       schema.StringAttribute{Computed: true},
			"target_uri":  schema.StringAttribute{Computed: true},
			"next_run_at": schema.StringAttribute{Computed: true, Description: "When the schedule starts the next run."},
		},
	}
}

// computedAttribute is a read-only data source attribute of type t.
func computedAttribute(t attr.Type, description string) schema.Attribute {
	switch tt := t.(type) {
	case basetypes.ObjectType:
		attrs := make(map[string]schema.Attribute, len(tt.AttrTypes))
		for name, at := range tt.AttrTypes {
			attrs[name] = computedAttribute(at, "")
		}
		return schema.SingleNestedAttribute{Computed: true, Attributes: attrs, Description: description}
	case basetypes.ListType:
		return schema.ListAttribute{Computed: true, ElementType: tt.ElemType, Description: description}
	case basetypes.MapType:
		return schema.MapAttribute{Computed: true, ElementType: tt.ElemType, Description: description}
	case basetypes.StringType:
		return schema.StringAttribute{Computed: true, Description: description}
	case basetypes.Int64Type:
		return schema.Int64Attribute{Computed: true, Description: description}
	case basetypes.Float64Type:
		return schema.Float64Attribute{Computed: true, Description: description}
	case basetypes.BoolType:
		return schema.BoolAttribute{Computed: true, Description: description}
	}
	panic(fmt.Sprintf("computedAttribute: no attribute for %T", t))
}

func (d *pipelineDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var config pipelineDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body, ok := findByIDOrName(ctx, d.client, "pipeline", "/pipelines", config.ID, config.Name, &resp.Diagnostics)
	if !ok {
		return
	}
	attrs := pipelineSchema().Attributes
	model, err := pipelineFromAnswer(ctx, body, "", pipelineModel{
		Source: types.ObjectNull(attrs["source"].GetType().(types.ObjectType).AttrTypes)})
	if err != nil {
		resp.Diagnostics.AddError("Inlet's pipeline could not be read", err.Error())
		return
	}
	var status pipelineAnswer
	_ = json.Unmarshal(body, &status) // pipelineFromAnswer has read the same body
	resp.Diagnostics.Append(resp.State.Set(ctx, pipelineDataModel{
		ID: model.ID, Name: model.Name, Source: model.Source, Target: model.Target, Schedule: model.Schedule,
		Contract: model.Contract, State: model.State, TargetURI: model.TargetURI,
		NextRunAt: types.StringPointerValue(status.Status.NextRunAt),
	})...)
}
