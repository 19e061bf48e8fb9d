package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"inlet.dev/terraform-provider-inlet/internal/inlet"
)

// LagAlertSpec's bounds (openapi.yaml).
const (
	lagRecordsMax = 1_000_000_000_000_000
	lagAgeMin     = 60
	lagAgeMax     = 2_678_400
)

// lagAlertResource is inlet_lag_alert: the lag at which a pipeline sends pipeline.lag_exceeded to the
// tenant's webhooks (and pipeline.lag_recovered once it is back below half). A pipeline has at most
// one; its id is the pipeline's.
type lagAlertResource struct {
	withClient
}

var (
	_ resource.ResourceWithConfigure   = (*lagAlertResource)(nil)
	_ resource.ResourceWithImportState = (*lagAlertResource)(nil)
	_ resource.ResourceWithIdentity    = (*lagAlertResource)(nil)
)

func newLagAlertResource() resource.Resource { return &lagAlertResource{} }

type lagAlertModel struct {
	ID          types.String `tfsdk:"id"`
	PipelineID  types.String `tfsdk:"pipeline_id"`
	LagRecords  types.Int64  `tfsdk:"lag_records"`
	LagAgeS     types.Int64  `tfsdk:"lag_age_s"`
	FreshnessS  types.Int64  `tfsdk:"freshness_s"`
	Status      types.String `tfsdk:"status"`
	RaisedAt    types.String `tfsdk:"raised_at"`
	ObservedLag types.Int64  `tfsdk:"observed_lag"`
	ObservedAt  types.String `tfsdk:"observed_at"`
	ETag        types.String `tfsdk:"etag"`
}

// lagAlertAnswer is LagAlertRead (behind_s, which grows between any two reads, left out).
type lagAlertAnswer struct {
	PipelineID string `json:"pipeline_id"`
	LagRecords int64  `json:"lag_records"`
	LagAgeS    *int64 `json:"lag_age_s"`
	FreshnessS *int64 `json:"freshness_s"`
	Status     struct {
		State       string  `json:"state"`
		Since       *string `json:"since"`
		ObservedLag *int64  `json:"observed_lag"`
		ObservedAt  *string `json:"observed_at"`
	} `json:"status"`
}

func (r *lagAlertResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_lag_alert"
}

func (r *lagAlertResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A pipeline's lag alert: the lag that sends pipeline.lag_exceeded to the tenant's webhooks, " +
			"and pipeline.lag_recovered once the lag is back below half of each threshold (docs/webhooks.md). " +
			"One per pipeline; paused pipelines are not evaluated.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed: true, Description: "The pipeline's id (a pipeline has one lag alert at most).",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"pipeline_id": schema.StringAttribute{
				Required: true, Description: "The pipeline alerted on.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"lag_records": schema.Int64Attribute{
				Required: true,
				Description: "Records between the pipeline's position and the partitions' ends, as its last plan or " +
					"commit saw them, that raise the alert (1 to 10^15).",
				Validators: []validator.Int64{int64validator.Between(1, lagRecordsMax)},
			},
			"lag_age_s": schema.Int64Attribute{
				Optional: true,
				Description: "Also raise the alert when the pipeline has not caught up for this many seconds " +
					"(60 to 2678400, i.e. 31 days).",
				Validators: []validator.Int64{int64validator.Between(lagAgeMin, lagAgeMax)},
			},
			"freshness_s": schema.Int64Attribute{
				Optional: true,
				Description: "Also raise the alert when records wait and the newest committed record is older " +
					"than this many seconds (1 to 2678400): a continuous pipeline's freshness target.",
				Validators: []validator.Int64{int64validator.Between(1, lagAgeMax)},
			},
			"status": schema.StringAttribute{
				Computed: true, Description: "ok, or exceeded while the alert is raised.",
			},
			"raised_at": schema.StringAttribute{
				Computed: true, Description: "When the alert was raised; null while it is not.",
			},
			"observed_lag": schema.Int64Attribute{
				Computed: true, Description: "The lag last observed; null: the pipeline was never planned.",
			},
			"observed_at": schema.StringAttribute{
				Computed: true, Description: "When the lag was last observed.",
			},
			"etag": schema.StringAttribute{
				Computed: true, Description: "The ETag Terraform sends back as If-Match.",
			},
		},
	}
}

func (r *lagAlertResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityByID()
}

func lagAlertPath(pipelineID string) string { return "/pipelines/" + pipelineID + "/lag-alert" }

func lagAlertBody(plan lagAlertModel) map[string]any {
	body := map[string]any{"lag_records": plan.LagRecords.ValueInt64()}
	if !plan.LagAgeS.IsNull() {
		body["lag_age_s"] = plan.LagAgeS.ValueInt64()
	}
	if !plan.FreshnessS.IsNull() {
		body["freshness_s"] = plan.FreshnessS.ValueInt64()
	}
	return body
}

func lagAlertState(answer *inlet.Answer) (lagAlertModel, error) {
	var a lagAlertAnswer
	if err := answer.Decode(&a); err != nil {
		return lagAlertModel{}, err
	}
	return lagAlertModel{
		ID: types.StringValue(a.PipelineID), PipelineID: types.StringValue(a.PipelineID),
		LagRecords: types.Int64Value(a.LagRecords), LagAgeS: types.Int64PointerValue(a.LagAgeS),
		FreshnessS: types.Int64PointerValue(a.FreshnessS),
		Status:     types.StringValue(a.Status.State), RaisedAt: types.StringPointerValue(a.Status.Since),
		ObservedLag: types.Int64PointerValue(a.Status.ObservedLag), ObservedAt: types.StringPointerValue(a.Status.ObservedAt),
		ETag: types.StringValue(answer.ETag),
	}, nil
}

// put sets the thresholds under If-Match etag ("": whatever is there) and saves Inlet's answer as the state.
func (r *lagAlertResource) put(ctx context.Context, plan lagAlertModel, etag string) (lagAlertModel, error) {
	answer, err := r.client.Put(ctx, lagAlertPath(plan.PipelineID.ValueString()), lagAlertBody(plan), etag)
	if err != nil {
		return lagAlertModel{}, err
	}
	return lagAlertState(answer)
}

func (r *lagAlertResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan lagAlertModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	pipelineID := plan.PipelineID.ValueString()
	existing, err := r.client.Find(ctx, lagAlertPath(pipelineID))
	if err != nil {
		reportAPIError(&resp.Diagnostics, "Reading the pipeline's lag alert", err)
		return
	}
	if existing != nil {
		resp.Diagnostics.AddAttributeError(path.Root("pipeline_id"), "The pipeline already has a lag alert",
			"Pipeline "+pipelineID+" has a lag alert Terraform does not manage: import it (its id is the "+
				"pipeline's) or delete it first.")
		return
	}
	state, err := r.put(ctx, plan, "")
	if err != nil {
		reportAPIError(&resp.Diagnostics, "Setting the lag alert", err)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
	setIDIdentity(ctx, resp.Identity, state.ID.ValueString(), &resp.Diagnostics)
}

func (r *lagAlertResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state lagAlertModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	answer, err := r.client.Find(ctx, lagAlertPath(state.ID.ValueString()))
	if err != nil {
		reportAPIError(&resp.Diagnostics, "Reading the lag alert", err)
		return
	}
	if answer == nil { // the alert, or its pipeline, is gone
		removeGone(ctx, &resp.State, resp.Identity, state.ID.ValueString(), &resp.Diagnostics)
		return
	}
	next, err := lagAlertState(answer)
	if err != nil {
		reportAPIError(&resp.Diagnostics, "Reading the lag alert", err)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &next)...)
	setIDIdentity(ctx, resp.Identity, next.ID.ValueString(), &resp.Diagnostics)
}

func (r *lagAlertResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var state, plan lagAlertModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	next, err := r.put(ctx, plan, state.ETag.ValueString())
	if err != nil {
		reportAPIError(&resp.Diagnostics, "Changing the lag alert", err)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &next)...)
	setIDIdentity(ctx, resp.Identity, next.ID.ValueString(), &resp.Diagnostics)
}

func (r *lagAlertResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state lagAlertModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.client.Delete(ctx, lagAlertPath(state.ID.ValueString()), state.ETag.ValueString()); err != nil {
		reportAPIError(&resp.Diagnostics, "Deleting the lag alert", err)
	}
}

func (r *lagAlertResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughWithIdentity(ctx, path.Root("id"), path.Root("id"), req, resp)
}
