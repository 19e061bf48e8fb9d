package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// identityByID is the resource identity of an object Inlet names by its id: what
// `import { identity = { id = "…" } }` gives (Terraform 1.12+).
func identityByID() identityschema.Schema {
	return identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"id": identityschema.StringAttribute{RequiredForImport: true, Description: "The object's id in Inlet."},
	}}
}

// setIDIdentity records id as the resource's identity (nil only where the framework passes none).
func setIDIdentity(ctx context.Context, identity *tfsdk.ResourceIdentity, id string, diags *diag.Diagnostics) {
	if identity == nil {
		return
	}
	diags.Append(identity.SetAttribute(ctx, pathID, types.StringValue(id))...)
}

var pathID = path.Root("id")

// removeGone drops an object Inlet no longer has from state. The framework refuses a Read that
// answers without an identity, even one that removes the resource (it fills in a null identity for a
// CLI that stores none, OpenTofu 1.10), so the prior id stays as the identity.
func removeGone(ctx context.Context, state *tfsdk.State, identity *tfsdk.ResourceIdentity, id string, diags *diag.Diagnostics) {
	setIDIdentity(ctx, identity, id, diags)
	state.RemoveResource(ctx)
}
