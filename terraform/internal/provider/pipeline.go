package provider

import (
	"context"
	"encoding/json"
	"regexp"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// inlet_pipeline: a Kafka source, a target, a schedule, a contract and a state. Inlet stores the
// source, target, schedule and contract as written and returns them so: an attribute the
// configuration leaves out keeps Inlet's default without a diff, and one changed through the API or
// the portal shows as drift.

var pipelineName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

var (
	_ resource.ResourceWithIdentity     = (*pipelineResource)(nil)
	_ resource.ResourceWithImportState  = (*pipelineResource)(nil)
	_ resource.ResourceWithModifyPlan   = (*pipelineResource)(nil)
	_ resource.ResourceWithUpgradeState = (*pipelineResource)(nil)
)

func newPipelineResource() resource.Resource { return &pipelineResource{} }

type pipelineResource struct{ withClient }

type pipelineModel struct {
	ID        types.String `tfsdk:"id"`
	Name      types.String `tfsdk:"name"`
	Source    types.Object `tfsdk:"source"`
	Target    types.Object `tfsdk:"target"`
	Schedule  types.Object `tfsdk:"schedule"`
	Contract  types.Object `tfsdk:"contract"`
	State     types.String `tfsdk:"state"`
	TargetURI types.String `tfsdk:"target_uri"`
	ETag      types.String `tfsdk:"etag"`
}

func (r *pipelineResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pipeline"
}

func pipelineSchema() schema.Schema {
	return schema.Schema{
		// 2: typed source, target and schedule (1, the Python provider's: jsonencode strings). Optional
		// attributes added since (schedule.continuous, contract, contract.sensitive) keep 2: a state
		// without them reads them as null, which a configuration without them plans as no change.
		// contract.evolution too: its default (add) is in state from the first refresh (contractFromAPI).
		Version:     2,
		Description: "An Inlet pipeline: a Kafka source, a Delta or Kafka target, a schedule, a data contract.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The pipeline's id.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, Validators: []validator.String{
				stringvalidator.LengthBetween(1, 100),
				stringvalidator.RegexMatches(pipelineName, "must start with a letter or digit, then letters, digits, . _ -"),
			}},
			"source":   sourceAttribute(),
			"target":   targetAttribute(),
			"schedule": scheduleAttribute(),
			"contract": contractAttribute(),
			"state": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("active"),
				Description: "active (the default) or paused.",
				Validators:  []validator.String{stringvalidator.OneOf("active", "paused")}},
			"target_uri": schema.StringAttribute{Computed: true, Description: "Where the Delta table lives (Delta targets)."},
			"etag":       schema.StringAttribute{Computed: true, Description: "The ETag Terraform sends back as If-Match."},
		},
	}
}

func (r *pipelineResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = pipelineSchema()
}

func (r *pipelineResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityByID()
}

// ModifyPlan keeps target_uri known while the target stays as it is (the default makes every
// computed attribute unknown once anything changes; only etag really moves then).
func (r *pipelineResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	var prior, planned pipelineModel
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	resp.Diagnostics.Append(req.Plan.Get(ctx, &planned)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if planned.Target.Equal(prior.Target) {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("target_uri"), prior.TargetURI)...)
	}
}

func (r *pipelineResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var planned pipelineModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &planned)...)
	if resp.Diagnostics.HasError() {
		return
	}
	answer, err := r.client.Create(ctx, "/pipelines", pipelineBody(planned))
	if err != nil {
		reportAPIError(&resp.Diagnostics, "Creating the pipeline", err)
		return
	}
	r.store(ctx, answer.Body, answer.ETag, planned, &resp.State, resp.Identity, &resp.Diagnostics)
}

func (r *pipelineResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var prior pipelineModel
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	answer, err := r.client.Find(ctx, "/pipelines/"+prior.ID.ValueString())
	if err != nil {
		reportAPIError(&resp.Diagnostics, "Reading the pipeline", err)
		return
	}
	if answer == nil {
		removeGone(ctx, &resp.State, resp.Identity, prior.ID.ValueString(), &resp.Diagnostics)
		return
	}
	r.store(ctx, answer.Body, answer.ETag, prior, &resp.State, resp.Identity, &resp.Diagnostics)
}

func (r *pipelineResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var planned, prior pipelineModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &planned)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	answer, err := r.client.Put(ctx, "/pipelines/"+prior.ID.ValueString(), pipelineBody(planned), prior.ETag.ValueString())
	if err != nil {
		reportAPIError(&resp.Diagnostics, "Updating the pipeline", err)
		return
	}
	r.store(ctx, answer.Body, answer.ETag, planned, &resp.State, resp.Identity, &resp.Diagnostics)
}

func (r *pipelineResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var prior pipelineModel
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.client.Delete(ctx, "/pipelines/"+prior.ID.ValueString(), prior.ETag.ValueString()); err != nil {
		reportAPIError(&resp.Diagnostics, "Deleting the pipeline", err)
	}
}

// ImportState takes the pipeline's id (`terraform import`, an import block's id, or its identity);
// Read then fills in the rest.
func (r *pipelineResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughWithIdentity(ctx, pathID, pathID, req, resp)
}

// store writes Inlet's answer as the state; prior's documents lend their spelling of equal values.
func (r *pipelineResource) store(ctx context.Context, body []byte, etag string, prior pipelineModel,
	state *tfsdk.State, identity *tfsdk.ResourceIdentity, diags *diag.Diagnostics) {
	model, err := pipelineFromAnswer(ctx, body, etag, prior)
	if err != nil {
		diags.AddError("Inlet's pipeline could not be read", err.Error())
		return
	}
	diags.Append(state.Set(ctx, model)...)
	setIDIdentity(ctx, identity, model.ID.ValueString(), diags)
}

type pipelineAnswer struct {
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Source   json.RawMessage `json:"source"`
	Target   json.RawMessage `json:"target"`
	Schedule json.RawMessage `json:"schedule"`
	Contract json.RawMessage `json:"contract"`
	State    string          `json:"state"`
	Status   struct {
		TargetURI *string `json:"target_uri"`
		NextRunAt *string `json:"next_run_at"`
	} `json:"status"`
}

func pipelineFromAnswer(ctx context.Context, body []byte, etag string, prior pipelineModel) (pipelineModel, error) {
	var answer pipelineAnswer
	if err := json.Unmarshal(body, &answer); err != nil {
		return pipelineModel{}, err
	}
	attrs := pipelineSchema().Attributes
	source, err := documentValue(ctx, answer.Source, attrs["source"].GetType(), func(raw map[string]any) map[string]any {
		return sourceFromAPI(raw, prior.Source)
	})
	if err != nil {
		return pipelineModel{}, err
	}
	target, err := documentValue(ctx, answer.Target, attrs["target"].GetType(), targetFromAPI)
	if err != nil {
		return pipelineModel{}, err
	}
	schedule, err := documentValue(ctx, answer.Schedule, attrs["schedule"].GetType(), nil)
	if err != nil {
		return pipelineModel{}, err
	}
	contract, err := documentValue(ctx, answer.Contract, attrs["contract"].GetType(), contractFromAPI)
	if err != nil {
		return pipelineModel{}, err
	}
	return pipelineModel{
		ID: types.StringValue(answer.ID), Name: types.StringValue(answer.Name), Source: source, Target: target,
		Schedule: schedule, Contract: contract, State: types.StringValue(answer.State),
		TargetURI: types.StringPointerValue(answer.Status.TargetURI), ETag: types.StringValue(etag),
	}, nil
}

// documentValue is the typed value of a JSON document, shaped first by reshape (nil: as it is). A
// document the answer leaves out is null, as is one it gives as null.
func documentValue(ctx context.Context, raw json.RawMessage, t attr.Type,
	reshape func(map[string]any) map[string]any) (types.Object, error) {
	objectType := t.(types.ObjectType)
	if len(raw) == 0 {
		return types.ObjectNull(objectType.AttrTypes), nil
	}
	decoded, err := decodeJSON(raw)
	if err != nil || decoded == nil {
		return types.ObjectNull(objectType.AttrTypes), err
	}
	if fields, ok := decoded.(map[string]any); ok && reshape != nil {
		decoded = reshape(fields)
	}
	value, err := fromJSON(ctx, decoded, t)
	if err != nil {
		return types.ObjectNull(objectType.AttrTypes), err
	}
	return value.(types.Object), nil
}

// pipelineBody is the pipeline as Inlet takes it. At apply the plan is whole (nothing unknown), and
// source and target, being required, are objects.
func pipelineBody(m pipelineModel) map[string]any {
	source, _ := toJSON(m.Source)
	target, _ := toJSON(m.Target)
	schedule, _ := toJSON(m.Schedule)
	sourceFields, _ := source.(map[string]any)
	targetFields, _ := target.(map[string]any)
	body := map[string]any{
		"name": m.Name.ValueString(), "source": sourceToAPI(sourceFields),
		"target": targetToAPI(targetFields), "schedule": schedule,
	}
	// Without a contract the body is the one Inlet took before contracts: no "contract": null.
	if contract, _ := toJSON(m.Contract); contract != nil {
		body["contract"] = contract
	}
	if !m.State.IsNull() && !m.State.IsUnknown() {
		body["state"] = m.State.ValueString()
	}
	return body
}

// The source's two spellings that differ from the API's: starting_partition_offsets is the API's
// starting_offsets object, and a registry schema's version is a number there ("latest" aside).
func sourceToAPI(source map[string]any) map[string]any {
	if offsets, ok := source["starting_partition_offsets"]; ok {
		source["starting_offsets"] = offsets
		delete(source, "starting_partition_offsets")
	}
	for _, part := range []string{"value_schema", "key_schema"} {
		if chosen, ok := source[part].(map[string]any); ok {
			if version, ok := chosen["version"].(string); ok && version != "latest" {
				chosen["version"] = json.Number(version)
			}
		}
	}
	return source
}

func sourceFromAPI(source map[string]any, prior types.Object) map[string]any {
	if offsets, ok := source["starting_offsets"].(map[string]any); ok {
		source["starting_partition_offsets"] = offsets
		delete(source, "starting_offsets")
	}
	for _, part := range []string{"value_schema", "key_schema"} {
		if chosen, ok := source[part].(map[string]any); ok {
			if version, ok := chosen["version"].(json.Number); ok {
				chosen["version"] = version.String()
			}
		}
	}
	// Inlet answers a time in its own spelling (Z for +00:00): the configuration's stays while it
	// names the same instant.
	if at, ok := source["starting_timestamp"].(string); ok && !prior.IsNull() && !prior.IsUnknown() {
		if written, ok := prior.Attributes()["starting_timestamp"].(types.String); ok && sameInstant(at, written.ValueString()) {
			source["starting_timestamp"] = written.ValueString()
		}
	}
	return source
}

func sameInstant(a, b string) bool {
	ta, errA := time.Parse(time.RFC3339Nano, a)
	tb, errB := time.Parse(time.RFC3339Nano, b)
	return errA == nil && errB == nil && ta.Equal(tb)
}

// The target's kind is its attribute's name here (delta = {…}), its "type" field in the API.
func targetToAPI(target map[string]any) map[string]any {
	for kind, fields := range target {
		document := fields.(map[string]any)
		document["type"] = kind
		return document
	}
	return target
}

func targetFromAPI(target map[string]any) map[string]any {
	kind, _ := target["type"].(string)
	delete(target, "type")
	return map[string]any{kind: target}
}

// A contract Inlet holds without evolution (written before it, or through the API or the portal
// without it) is in effect add, the attribute's default: it reads so, and plans no change.
func contractFromAPI(contract map[string]any) map[string]any {
	if contract["evolution"] == nil {
		contract["evolution"] = "add"
	}
	return contract
}
