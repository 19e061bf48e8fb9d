package provider

import (
	"context"
	"regexp"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"inlet.dev/terraform-provider-inlet/internal/inlet"
)

// webhookEvents are the events an endpoint may subscribe to (openapi.yaml WebhookSpec.events).
var webhookEvents = []string{
	"run.failed", "run.succeeded", "pipeline.recovered", "pipeline.data_loss", "pipeline.lag_exceeded",
	"pipeline.lag_recovered", "pipeline.expectation_exceeded", "offsets.changed",
}

// webhookDefaultEvents is what Inlet subscribes an endpoint to when none are named: every event but
// run.succeeded, which is sent only where it is named.
var webhookDefaultEvents = []string{
	"run.failed", "pipeline.recovered", "pipeline.data_loss", "pipeline.lag_exceeded", "pipeline.lag_recovered",
	"pipeline.expectation_exceeded", "offsets.changed",
}

var webhookURLPattern = regexp.MustCompile(`^(?i)https?://[^/?#]+`)

// webhookResource is inlet_webhook: an endpoint Inlet sends signed event notifications to. Its
// signing secret is Inlet's, shown by the create and by each rotation only: it is kept in state as a
// sensitive value, and changing secret_version rotates it.
type webhookResource struct {
	withClient
}

var (
	_ resource.ResourceWithConfigure   = (*webhookResource)(nil)
	_ resource.ResourceWithImportState = (*webhookResource)(nil)
	_ resource.ResourceWithIdentity    = (*webhookResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*webhookResource)(nil)
)

func newWebhookResource() resource.Resource { return &webhookResource{} }

type webhookModel struct {
	ID              types.String `tfsdk:"id"`
	URL             types.String `tfsdk:"url"`
	Events          types.Set    `tfsdk:"events"`
	Description     types.String `tfsdk:"description"`
	Enabled         types.Bool   `tfsdk:"enabled"`
	SecretVersion   types.Int64  `tfsdk:"secret_version"`
	Secret          types.String `tfsdk:"secret"`
	SecretRotatedAt types.String `tfsdk:"secret_rotated_at"`
	CreatedAt       types.String `tfsdk:"created_at"`
	ETag            types.String `tfsdk:"etag"`
}

// webhookAnswer is WebhookWithSecret, and WebhookRead without its secret.
type webhookAnswer struct {
	ID              string   `json:"id"`
	URL             string   `json:"url"`
	Events          []string `json:"events"`
	Description     string   `json:"description"`
	Enabled         bool     `json:"enabled"`
	SecretRotatedAt *string  `json:"secret_rotated_at"`
	CreatedAt       string   `json:"created_at"`
	Secret          *string  `json:"secret"`
}

func (r *webhookResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_webhook"
}

func stringSet(values []string) types.Set {
	elems := make([]attr.Value, 0, len(values))
	for _, v := range values {
		elems = append(elems, types.StringValue(v))
	}
	return types.SetValueMust(types.StringType, elems)
}

func (r *webhookResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "An endpoint Inlet sends signed event notifications to (docs/webhooks.md). Its signing " +
			"secret is shown only by the apply that creates or rotates it.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed: true, Description: "The webhook's id.", PlanModifiers: keep,
			},
			"url": schema.StringAttribute{
				Required: true,
				Description: "The http(s) URL deliveries are POSTed to (no credentials, no fragment); its host must be " +
					"one the operator lets webhooks go to.",
				Validators: []validator.String{
					stringvalidator.LengthBetween(1, 2048),
					stringvalidator.RegexMatches(webhookURLPattern, "must be an http:// or https:// URL with a host"),
				},
			},
			"events": schema.SetAttribute{
				ElementType: types.StringType,
				Optional:    true,
				Computed:    true,
				Default:     setdefault.StaticValue(stringSet(webhookDefaultEvents)),
				Description: "The events sent to this endpoint: run.failed, run.succeeded, pipeline.recovered, " +
					"pipeline.data_loss, pipeline.lag_exceeded, pipeline.lag_recovered, pipeline.expectation_exceeded, " +
					"offsets.changed " +
					"(default: all but run.succeeded).",
				Validators: []validator.Set{
					setvalidator.SizeAtLeast(1),
					setvalidator.ValueStringsAre(stringvalidator.OneOf(webhookEvents...)),
				},
			},
			"description": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(""),
				Description: "What the endpoint is for (at most 500 characters).",
				Validators:  []validator.String{stringvalidator.LengthAtMost(500)},
			},
			"enabled": schema.BoolAttribute{
				Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				Description: "Whether events are sent to it (default true).",
			},
			"secret_version": schema.Int64Attribute{
				Optional: true,
				Description: "Any number: changing it to another rotates the signing secret (the previous one keeps " +
					"signing beside the new one for 24 hours).",
			},
			"secret": schema.StringAttribute{
				Computed: true, Sensitive: true, PlanModifiers: keep,
				Description: "The signing secret (whsec_…); known to the apply that created or last rotated it " +
					"(null after an import, until a rotation).",
			},
			"secret_rotated_at": schema.StringAttribute{
				Computed: true, PlanModifiers: keep,
				Description: "When the signing secret was last rotated; null: never.",
			},
			"created_at": schema.StringAttribute{
				Computed: true, Description: "When the webhook was created.", PlanModifiers: keep,
			},
			"etag": schema.StringAttribute{
				Computed: true, Description: "The ETag Terraform sends back as If-Match.",
			},
		},
	}
}

func (r *webhookResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityByID()
}

// webhookRotates says whether the plan moves secret_version to a new value (removing it rotates nothing).
func webhookRotates(state, plan webhookModel) bool {
	if plan.SecretVersion.IsNull() {
		return false
	}
	return plan.SecretVersion.IsUnknown() || !plan.SecretVersion.Equal(state.SecretVersion)
}

// ModifyPlan makes the secret and its rotation time unknown when the update rotates the secret.
func (r *webhookResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	var state, plan webhookModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !webhookRotates(state, plan) {
		return
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("secret"), types.StringUnknown())...)
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("secret_rotated_at"), types.StringUnknown())...)
}

func webhookPath(id string) string { return "/webhooks/" + id }

// webhookBody is the WebhookSpec of plan (PATCH takes it whole as its merge patch).
func webhookBody(ctx context.Context, plan webhookModel, diags *diag.Diagnostics) map[string]any {
	var events []string
	diags.Append(plan.Events.ElementsAs(ctx, &events, false)...)
	sort.Strings(events)
	return map[string]any{
		"url": plan.URL.ValueString(), "events": events, "description": plan.Description.ValueString(),
		"enabled": plan.Enabled.ValueBool(),
	}
}

// webhookState is the state of answer (with its ETag), keeping what Inlet does not return from known.
func webhookState(answer webhookAnswer, etag string, known webhookModel) webhookModel {
	state := webhookModel{
		ID: types.StringValue(answer.ID), URL: types.StringValue(answer.URL), Events: stringSet(answer.Events),
		Description: types.StringValue(answer.Description), Enabled: types.BoolValue(answer.Enabled),
		SecretVersion: known.SecretVersion, Secret: known.Secret, SecretRotatedAt: types.StringPointerValue(answer.SecretRotatedAt),
		CreatedAt: types.StringValue(answer.CreatedAt), ETag: types.StringValue(etag),
	}
	if answer.Secret != nil {
		state.Secret = types.StringValue(*answer.Secret)
	}
	if state.Secret.IsUnknown() {
		state.Secret = types.StringNull()
	}
	return state
}

func decodeWebhook(answer *inlet.Answer) (webhookAnswer, error) {
	var w webhookAnswer
	err := answer.Decode(&w)
	return w, err
}

// rotate gets the webhook a new signing secret under If-Match etag.
func (r *webhookResource) rotate(ctx context.Context, id, etag string) (*inlet.Answer, webhookAnswer, error) {
	answer, err := r.client.Post(ctx, webhookPath(id)+"/rotate-secret", etag)
	if err != nil {
		return nil, webhookAnswer{}, err
	}
	w, err := decodeWebhook(answer)
	return answer, w, err
}

func (r *webhookResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan webhookModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	body := webhookBody(ctx, plan, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	answer, err := r.client.Create(ctx, "/webhooks", body)
	if err != nil {
		reportAPIError(&resp.Diagnostics, "Creating the webhook", err)
		return
	}
	created, err := decodeWebhook(answer)
	if err != nil {
		reportAPIError(&resp.Diagnostics, "Creating the webhook", err)
		return
	}
	if created.Secret == nil { // a replay of a create whose answer was lost: a new secret is the only way to one
		answer, created, err = r.rotate(ctx, created.ID, answer.ETag)
		if err != nil {
			reportAPIError(&resp.Diagnostics, "Rotating the secret of the webhook whose answer was lost", err)
			return
		}
	}
	state := webhookState(created, answer.ETag, plan)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
	setIDIdentity(ctx, resp.Identity, state.ID.ValueString(), &resp.Diagnostics)
}

func (r *webhookResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state webhookModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	answer, err := r.client.Find(ctx, webhookPath(state.ID.ValueString()))
	if err != nil {
		reportAPIError(&resp.Diagnostics, "Reading the webhook", err)
		return
	}
	if answer == nil {
		removeGone(ctx, &resp.State, resp.Identity, state.ID.ValueString(), &resp.Diagnostics)
		return
	}
	read, err := decodeWebhook(answer)
	if err != nil {
		reportAPIError(&resp.Diagnostics, "Reading the webhook", err)
		return
	}
	next := webhookState(read, answer.ETag, state)
	resp.Diagnostics.Append(resp.State.Set(ctx, &next)...)
	setIDIdentity(ctx, resp.Identity, next.ID.ValueString(), &resp.Diagnostics)
}

func (r *webhookResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var state, plan webhookModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	body := webhookBody(ctx, plan, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	id, etag := state.ID.ValueString(), state.ETag.ValueString()
	var current webhookAnswer
	var answer *inlet.Answer
	var err error
	if !plan.URL.Equal(state.URL) || !plan.Events.Equal(state.Events) || !plan.Description.Equal(state.Description) ||
		!plan.Enabled.Equal(state.Enabled) {
		if answer, err = r.client.Patch(ctx, webhookPath(id), body, etag); err == nil {
			current, err = decodeWebhook(answer)
		}
		if err != nil {
			reportAPIError(&resp.Diagnostics, "Changing the webhook", err)
			return
		}
		etag = answer.ETag
	}
	if webhookRotates(state, plan) {
		if answer, current, err = r.rotate(ctx, id, etag); err != nil {
			reportAPIError(&resp.Diagnostics, "Rotating the webhook's signing secret", err)
			return
		}
	}
	if answer == nil { // only secret_version went away: nothing to send
		if answer, err = r.client.Get(ctx, webhookPath(id), nil); err == nil {
			current, err = decodeWebhook(answer)
		}
		if err != nil {
			reportAPIError(&resp.Diagnostics, "Reading the webhook", err)
			return
		}
	}
	known := plan
	known.Secret = state.Secret
	next := webhookState(current, answer.ETag, known)
	resp.Diagnostics.Append(resp.State.Set(ctx, &next)...)
	setIDIdentity(ctx, resp.Identity, next.ID.ValueString(), &resp.Diagnostics)
}

func (r *webhookResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state webhookModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.client.Delete(ctx, webhookPath(state.ID.ValueString()), state.ETag.ValueString()); err != nil {
		reportAPIError(&resp.Diagnostics, "Deleting the webhook", err)
	}
}

func (r *webhookResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughWithIdentity(ctx, path.Root("id"), path.Root("id"), req, resp)
}
