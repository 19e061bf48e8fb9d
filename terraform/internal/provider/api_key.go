package provider

import (
	"context"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// apiKeyRoles are the roles a key may have (openapi.yaml Role).
var apiKeyRoles = []string{"viewer", "editor", "admin"}

// apiKeyNamePattern is ApiKeyCreate's name pattern.
var apiKeyNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9 ._-]*$`)

// apiKeyResource is inlet_api_key: another API key of the provider's tenant (the provider's key needs
// the admin role). The key is shown once, by the create that issues it: it is kept in state as a
// sensitive value and never read back. A key revoked outside Terraform is gone: the next apply issues
// a new one.
type apiKeyResource struct {
	withClient
}

var (
	_ resource.ResourceWithConfigure   = (*apiKeyResource)(nil)
	_ resource.ResourceWithImportState = (*apiKeyResource)(nil)
	_ resource.ResourceWithIdentity    = (*apiKeyResource)(nil)
)

func newAPIKeyResource() resource.Resource { return &apiKeyResource{} }

type apiKeyModel struct {
	ID        types.String `tfsdk:"id"`
	Name      types.String `tfsdk:"name"`
	Role      types.String `tfsdk:"role"`
	Prefix    types.String `tfsdk:"prefix"`
	Key       types.String `tfsdk:"key"`
	CreatedAt types.String `tfsdk:"created_at"`
}

// apiKeyAnswer is ApiKeyCreated, and ApiKeyRead without its key.
type apiKeyAnswer struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Role      string  `json:"role"`
	Prefix    string  `json:"prefix"`
	CreatedAt string  `json:"created_at"`
	RevokedAt *string `json:"revoked_at"`
	Key       *string `json:"key"`
}

func (r *apiKeyResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_api_key"
}

func (r *apiKeyResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		// 1, as the Python provider 0.1 wrote its states: they read as they are.
		Version: 1,
		Description: "An API key of the provider's tenant. The key is known only to the apply that issued it; " +
			"revoking it outside Terraform makes the next apply issue a new one.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed: true, Description: "The key's id.", PlanModifiers: keep,
			},
			"name": schema.StringAttribute{
				Required:    true,
				Description: "A name to recognise the key by (letters, digits, space, '.', '_', '-'; at most 100).",
				Validators: []validator.String{
					stringvalidator.LengthBetween(1, 100),
					stringvalidator.RegexMatches(apiKeyNamePattern, "must start with a letter or digit and hold only "+
						"letters, digits, spaces, '.', '_' and '-'"),
				},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"role": schema.StringAttribute{
				Required:      true,
				Description:   "viewer, editor or admin.",
				Validators:    []validator.String{stringvalidator.OneOf(apiKeyRoles...)},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"prefix": schema.StringAttribute{
				Computed: true, Description: "The key's first characters, to recognise it.", PlanModifiers: keep,
			},
			"key": schema.StringAttribute{
				Computed: true, Sensitive: true, PlanModifiers: keep,
				Description: "The API key; known only to the apply that issued it (null after an import).",
			},
			"created_at": schema.StringAttribute{
				Computed: true, Description: "When the key was issued.", PlanModifiers: keep,
			},
		},
	}
}

func (r *apiKeyResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityByID()
}

func apiKeyPath(id string) string { return "/api-keys/" + id }

// apiKeyState is the state of answer, holding key (what only the create knew).
func apiKeyState(answer apiKeyAnswer, key types.String) apiKeyModel {
	return apiKeyModel{
		ID: types.StringValue(answer.ID), Name: types.StringValue(answer.Name), Role: types.StringValue(answer.Role),
		Prefix: types.StringValue(answer.Prefix), Key: key, CreatedAt: types.StringValue(answer.CreatedAt),
	}
}

func (r *apiKeyResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan apiKeyModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	answer, err := r.client.Create(ctx, "/api-keys", map[string]any{"name": plan.Name.ValueString(), "role": plan.Role.ValueString()})
	if err != nil {
		reportAPIError(&resp.Diagnostics, "Issuing the API key", err)
		return
	}
	var issued apiKeyAnswer
	if err := answer.Decode(&issued); err != nil {
		reportAPIError(&resp.Diagnostics, "Issuing the API key", err)
		return
	}
	if issued.Key == nil { // a replay of a create whose answer was lost: Inlet does not keep the key
		if err := r.client.Delete(ctx, apiKeyPath(issued.ID), ""); err != nil {
			reportAPIError(&resp.Diagnostics, "Revoking the API key whose answer was lost", err)
			return
		}
		resp.Diagnostics.AddError("The new API key was lost on its way back",
			"Inlet issued it but its answer did not arrive; it has been revoked. Apply again to issue another.")
		return
	}
	state := apiKeyState(issued, types.StringValue(*issued.Key))
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
	setIDIdentity(ctx, resp.Identity, state.ID.ValueString(), &resp.Diagnostics)
}

func (r *apiKeyResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state apiKeyModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	answer, err := r.client.Find(ctx, apiKeyPath(state.ID.ValueString()))
	if err != nil {
		reportAPIError(&resp.Diagnostics, "Reading the API key", err)
		return
	}
	var read apiKeyAnswer
	if answer != nil {
		if err := answer.Decode(&read); err != nil {
			reportAPIError(&resp.Diagnostics, "Reading the API key", err)
			return
		}
	}
	if answer == nil || read.RevokedAt != nil {
		removeGone(ctx, &resp.State, resp.Identity, state.ID.ValueString(), &resp.Diagnostics)
		return
	}
	next := apiKeyState(read, state.Key)
	resp.Diagnostics.Append(resp.State.Set(ctx, &next)...)
	setIDIdentity(ctx, resp.Identity, next.ID.ValueString(), &resp.Diagnostics)
}

// Update has nothing to send: every argument replaces the key.
func (r *apiKeyResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan apiKeyModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	setIDIdentity(ctx, resp.Identity, plan.ID.ValueString(), &resp.Diagnostics)
}

func (r *apiKeyResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state apiKeyModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.client.Delete(ctx, apiKeyPath(state.ID.ValueString()), ""); err != nil {
		reportAPIError(&resp.Diagnostics, "Revoking the API key", err)
	}
}

func (r *apiKeyResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughWithIdentity(ctx, path.Root("id"), path.Root("id"), req, resp)
}
