package provider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// States written by the Python provider: version 1 (before the schema registry) and version 2 (before
// the write-only arguments) become version 3, every attribute they did not have null.

// connectionV2 holds the attributes of schema version 2 (the Python provider's).
type connectionV2 struct {
	connectionV1
	connectionRegistry
}

func (r *connectionResource) UpgradeState(context.Context) map[int64]resource.StateUpgrader {
	current := connectionSchema()
	prior := func(drop func(name string) bool) *schema.Schema {
		attributes := map[string]schema.Attribute{}
		for name, a := range current.Attributes {
			if !drop(name) {
				attributes[name] = a
			}
		}
		return &schema.Schema{Attributes: attributes}
	}
	v3only := func(name string) bool {
		_, wo := connWriteOnlyTwins[name]
		return wo || name == "credentials_wo_version"
	}
	upgrade := func(ctx context.Context, old connectionV2, resp *resource.UpgradeStateResponse) {
		state := connectionModel{connectionV1: old.connectionV1, connectionRegistry: old.connectionRegistry}
		state.connectionWriteOnly = connectionWriteOnly{
			SaslPasswordWO: types.StringNull(), OAuthClientSecretWO: types.StringNull(), SslKeyPemWO: types.StringNull(),
			SslKeyPasswordWO: types.StringNull(), RegistryPasswordWO: types.StringNull(), RegistryTokenWO: types.StringNull(),
			CredentialsWOVersion: types.Int64Null(),
		}
		resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
	}
	return map[int64]resource.StateUpgrader{
		// Version 1 (the Python provider before the schema registry): every schema_registry_* is null.
		1: {
			PriorSchema: prior(func(name string) bool { return v3only(name) || strings.HasPrefix(name, "schema_registry_") }),
			StateUpgrader: func(ctx context.Context, req resource.UpgradeStateRequest, resp *resource.UpgradeStateResponse) {
				var old connectionV1
				resp.Diagnostics.Append(req.State.Get(ctx, &old)...)
				if resp.Diagnostics.HasError() {
					return
				}
				registry := connectionRegistry{RegistryURL: types.StringNull(), RegistryUsername: types.StringNull(),
					RegistryPassword: types.StringNull(), RegistryToken: types.StringNull(), RegistryCaPem: types.StringNull(),
					RegistryEndpointIdentification: types.StringNull()}
				upgrade(ctx, connectionV2{connectionV1: old, connectionRegistry: registry}, resp)
			},
		},
		// Version 2 (the Python provider): the write-only arguments and credentials_wo_version are null.
		2: {
			PriorSchema: prior(v3only),
			StateUpgrader: func(ctx context.Context, req resource.UpgradeStateRequest, resp *resource.UpgradeStateResponse) {
				var old connectionV2
				resp.Diagnostics.Append(req.State.Get(ctx, &old)...)
				if resp.Diagnostics.HasError() {
					return
				}
				upgrade(ctx, old, resp)
			},
		},
	}
}
