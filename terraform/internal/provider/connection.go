package provider

import (
	"context"
	"encoding/json"
	"os"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// connectionResource is inlet_connection: a Kafka cluster, its schema registry (the schema_registry_*
// attributes), and how to reach them.
//
// Credentials (the cluster's and the registry's) and the TLS private key are write-only in Inlet: they
// go to its secret store and are never read back. Each can be given two ways. A sensitive argument
// (sasl_password) is kept in state as the configuration gave it, and a change to it rotates the secret.
// A write-only argument (sasl_password_wo, CLIs 1.11+) is never in plan or state, so Terraform cannot
// see it change: it is sent on create and whenever credentials_wo_version changes. Credentials are sent
// only when they change (Inlet keeps an omitted one; null removes it), so an unrelated update never
// rotates the secret. A rotation outside Terraform (credentials_version moved) or credentials removed
// outside it show as drift, and the next apply sends the configured ones again.
type connectionResource struct {
	withClient
}

var (
	_ resource.ResourceWithConfigure      = (*connectionResource)(nil)
	_ resource.ResourceWithImportState    = (*connectionResource)(nil)
	_ resource.ResourceWithIdentity       = (*connectionResource)(nil)
	_ resource.ResourceWithValidateConfig = (*connectionResource)(nil)
	_ resource.ResourceWithUpgradeState   = (*connectionResource)(nil)
)

func newConnectionResource() resource.Resource { return &connectionResource{} }

// importCredentialsEnv holds, for an import, the write-only values the configuration gives (JSON).
const importCredentialsEnv = "INLET_IMPORT_CREDENTIALS"

// The parts of the one secret Inlet keeps for a connection (one credentials_version): the cluster's
// credentials, the TLS key and the registry's credentials. Each part is sent whole.
const (
	clusterPart = iota
	sslKeyPart
	registryPart
)

var secretParts = [][]string{
	clusterPart:  {"sasl_username", "sasl_password", "oauth_client_id", "oauth_client_secret", "oauth_token_endpoint_url", "oauth_scope"},
	sslKeyPart:   {"ssl_key_pem", "ssl_key_password"},
	registryPart: {"schema_registry_username", "schema_registry_password", "schema_registry_token"},
}

// connWriteOnlyTwins maps each write-only argument to the sensitive argument it stands for.
var connWriteOnlyTwins = map[string]string{
	"sasl_password_wo":            "sasl_password",
	"oauth_client_secret_wo":      "oauth_client_secret",
	"ssl_key_pem_wo":              "ssl_key_pem",
	"ssl_key_password_wo":         "ssl_key_password",
	"schema_registry_password_wo": "schema_registry_password",
	"schema_registry_token_wo":    "schema_registry_token",
}

// connectionV1 holds the attributes of schema version 1 (the Python provider's first).
type connectionV1 struct {
	ID                        types.String `tfsdk:"id"`
	Name                      types.String `tfsdk:"name"`
	BootstrapServers          types.String `tfsdk:"bootstrap_servers"`
	SecurityProtocol          types.String `tfsdk:"security_protocol"`
	SaslMechanism             types.String `tfsdk:"sasl_mechanism"`
	SaslUsername              types.String `tfsdk:"sasl_username"`
	SaslPassword              types.String `tfsdk:"sasl_password"`
	OAuthClientID             types.String `tfsdk:"oauth_client_id"`
	OAuthClientSecret         types.String `tfsdk:"oauth_client_secret"`
	OAuthTokenEndpointURL     types.String `tfsdk:"oauth_token_endpoint_url"`
	OAuthScope                types.String `tfsdk:"oauth_scope"`
	SslCaPem                  types.String `tfsdk:"ssl_ca_pem"`
	SslCertificatePem         types.String `tfsdk:"ssl_certificate_pem"`
	SslKeyPem                 types.String `tfsdk:"ssl_key_pem"`
	SslKeyPassword            types.String `tfsdk:"ssl_key_password"`
	SslEndpointIdentification types.String `tfsdk:"ssl_endpoint_identification"`
	Options                   types.Map    `tfsdk:"options"`
	CredentialsVersion        types.Int64  `tfsdk:"credentials_version"`
	CredentialsStatus         types.String `tfsdk:"credentials_status"`
	ETag                      types.String `tfsdk:"etag"`
}

// connectionRegistry holds the schema_registry_* attributes (version 2).
type connectionRegistry struct {
	RegistryURL                    types.String `tfsdk:"schema_registry_url"`
	RegistryUsername               types.String `tfsdk:"schema_registry_username"`
	RegistryPassword               types.String `tfsdk:"schema_registry_password"`
	RegistryToken                  types.String `tfsdk:"schema_registry_token"`
	RegistryCaPem                  types.String `tfsdk:"schema_registry_ca_pem"`
	RegistryEndpointIdentification types.String `tfsdk:"schema_registry_endpoint_identification"`
}

// connectionWriteOnly holds the write-only arguments and the version that sends them (version 3).
type connectionWriteOnly struct {
	SaslPasswordWO       types.String `tfsdk:"sasl_password_wo"`
	OAuthClientSecretWO  types.String `tfsdk:"oauth_client_secret_wo"`
	SslKeyPemWO          types.String `tfsdk:"ssl_key_pem_wo"`
	SslKeyPasswordWO     types.String `tfsdk:"ssl_key_password_wo"`
	RegistryPasswordWO   types.String `tfsdk:"schema_registry_password_wo"`
	RegistryTokenWO      types.String `tfsdk:"schema_registry_token_wo"`
	CredentialsWOVersion types.Int64  `tfsdk:"credentials_wo_version"`
}

type connectionModel struct {
	connectionV1
	connectionRegistry
	connectionWriteOnly
}

// byName are the model's string attributes by name.
func (m *connectionModel) byName() map[string]*types.String {
	return map[string]*types.String{
		"id": &m.ID, "name": &m.Name, "bootstrap_servers": &m.BootstrapServers,
		"security_protocol": &m.SecurityProtocol, "sasl_mechanism": &m.SaslMechanism,
		"sasl_username": &m.SaslUsername, "sasl_password": &m.SaslPassword,
		"oauth_client_id": &m.OAuthClientID, "oauth_client_secret": &m.OAuthClientSecret,
		"oauth_token_endpoint_url": &m.OAuthTokenEndpointURL, "oauth_scope": &m.OAuthScope,
		"ssl_ca_pem": &m.SslCaPem, "ssl_certificate_pem": &m.SslCertificatePem,
		"ssl_key_pem": &m.SslKeyPem, "ssl_key_password": &m.SslKeyPassword,
		"ssl_endpoint_identification": &m.SslEndpointIdentification,
		"schema_registry_url":         &m.RegistryURL, "schema_registry_username": &m.RegistryUsername,
		"schema_registry_password": &m.RegistryPassword, "schema_registry_token": &m.RegistryToken,
		"schema_registry_ca_pem":                  &m.RegistryCaPem,
		"schema_registry_endpoint_identification": &m.RegistryEndpointIdentification,
		"sasl_password_wo":                        &m.SaslPasswordWO, "oauth_client_secret_wo": &m.OAuthClientSecretWO,
		"ssl_key_pem_wo": &m.SslKeyPemWO, "ssl_key_password_wo": &m.SslKeyPasswordWO,
		"schema_registry_password_wo": &m.RegistryPasswordWO, "schema_registry_token_wo": &m.RegistryTokenWO,
		"credentials_status": &m.CredentialsStatus, "etag": &m.ETag,
	}
}

func (m *connectionModel) str(name string) types.String { return *m.byName()[name] }

func (r *connectionResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_connection"
}

func (r *connectionResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityByID()
}

func (r *connectionResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = connectionSchema()
}

func connectionPath(id string) string { return "/connections/" + id }

func (r *connectionResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	const action = "Creating the connection"
	var plan, config connectionModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body, err := connectionBody(ctx, connInputs{plan: &plan, config: &config}, nil, nil)
	if err != nil {
		resp.Diagnostics.AddError(action, err.Error())
		return
	}
	answer, err := r.client.Create(ctx, "/connections", body)
	if err != nil {
		reportAPIError(&resp.Diagnostics, action, err)
		return
	}
	sent := connWriteOnlyGiven(&config)
	state, err := connAppliedState(ctx, answer, &plan, sent)
	if err != nil {
		resp.Diagnostics.AddError(action, err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
	setIDIdentity(ctx, resp.Identity, state.ID.ValueString(), &resp.Diagnostics)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, connPrivateWriteOnly, connEncodeSent(sent))...)
}

func (r *connectionResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	const action = "Reading the connection"
	var state connectionModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	answer, err := r.client.Find(ctx, connectionPath(state.ID.ValueString()))
	if err != nil {
		reportAPIError(&resp.Diagnostics, action, err)
		return
	}
	if answer == nil {
		removeGone(ctx, &resp.State, resp.Identity, state.ID.ValueString(), &resp.Diagnostics)
		return
	}
	a, err := decodeConnection(answer.Body)
	if err != nil {
		resp.Diagnostics.AddError(action, err.Error())
		return
	}
	raw, d := req.Private.GetKey(ctx, connPrivateWriteOnly)
	resp.Diagnostics.Append(d...)
	sent := connDecodeSent(raw)
	next, err := connectionState(ctx, a, answer.ETag, &state, sent)
	if err != nil {
		resp.Diagnostics.AddError(action, err.Error())
		return
	}
	// A secret the write-only arguments gave is not Inlet's any more: a null version in state plans
	// the configured one, and that update sends them again.
	if !state.CredentialsWOVersion.IsNull() && connWriteOnlyDrifted(a, &state, sent) {
		next.CredentialsWOVersion = types.Int64Null()
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &next)...)
	setIDIdentity(ctx, resp.Identity, next.ID.ValueString(), &resp.Diagnostics)
}

func (r *connectionResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	const action = "Updating the connection"
	var plan, config, prior connectionModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	raw, d := req.Private.GetKey(ctx, connPrivateWriteOnly)
	resp.Diagnostics.Append(d...)
	body, err := connectionBody(ctx, connInputs{plan: &plan, config: &config}, &prior, connDecodeSent(raw))
	if err != nil {
		resp.Diagnostics.AddError(action, err.Error())
		return
	}
	answer, err := r.client.Put(ctx, connectionPath(prior.ID.ValueString()), body, prior.ETag.ValueString())
	if err != nil {
		reportAPIError(&resp.Diagnostics, action, err)
		return
	}
	sent := connWriteOnlyGiven(&config)
	state, err := connAppliedState(ctx, answer, &plan, sent)
	if err != nil {
		resp.Diagnostics.AddError(action, err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
	setIDIdentity(ctx, resp.Identity, state.ID.ValueString(), &resp.Diagnostics)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, connPrivateWriteOnly, connEncodeSent(sent))...)
}

func (r *connectionResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state connectionModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.client.Delete(ctx, connectionPath(state.ID.ValueString()), state.ETag.ValueString()); err != nil {
		reportAPIError(&resp.Diagnostics, "Deleting the connection", err)
	}
}

// connImportable are the keys INLET_IMPORT_CREDENTIALS may hold.
var connImportable = func() map[string]bool {
	names := map[string]bool{"credentials_wo_version": true}
	for _, part := range secretParts {
		for _, n := range part {
			names[n] = true
		}
	}
	return names
}()

// connImportCredentials are the values INLET_IMPORT_CREDENTIALS gives (none when it is not set);
// ok is false when it is not a JSON object of importable attributes.
func connImportCredentials() (values map[string]attr.Value, ok bool) {
	values = map[string]attr.Value{}
	raw := os.Getenv(importCredentialsEnv)
	if raw == "" {
		return values, true
	}
	var supplied map[string]any
	if json.Unmarshal([]byte(raw), &supplied) != nil || supplied == nil {
		return nil, false
	}
	for name, v := range supplied {
		if !connImportable[name] {
			return nil, false
		}
		switch v := v.(type) {
		case nil:
		case float64:
			if name != "credentials_wo_version" || v != float64(int64(v)) {
				return nil, false
			}
			values[name] = types.Int64Value(int64(v))
		case string:
			if name == "credentials_wo_version" {
				return nil, false
			}
			values[name] = types.StringValue(v)
		default:
			return nil, false
		}
	}
	return values, true
}

// ImportState imports by id or by identity. Secrets cannot be read back: give the ones the
// configuration holds in INLET_IMPORT_CREDENTIALS (a JSON object of sasl_*, oauth_*, ssl_key_* and
// schema_registry_{username,password,token} attributes, and credentials_wo_version where the
// configuration gives write-only ones) and the first plan after the import shows no change.
func (r *connectionResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	const action = "Importing the connection"
	supplied, ok := connImportCredentials()
	if !ok {
		names := make([]string, 0, len(connImportable))
		for n := range connImportable {
			names = append(names, n)
		}
		sort.Strings(names)
		resp.Diagnostics.AddError(importCredentialsEnv+" is not a JSON object of write-only attributes",
			"Its keys can be: "+strings.Join(names, ", ")+" (strings; credentials_wo_version a number).")
		return
	}
	resource.ImportStatePassthroughWithIdentity(ctx, pathID, pathID, req, resp)
	if resp.Diagnostics.HasError() {
		return
	}
	var id types.String
	resp.Diagnostics.Append(resp.State.GetAttribute(ctx, pathID, &id)...)
	if resp.Diagnostics.HasError() {
		return
	}
	answer, err := r.client.Find(ctx, connectionPath(id.ValueString()))
	if err != nil {
		reportAPIError(&resp.Diagnostics, action, err)
		return
	}
	if answer == nil {
		notFound(&resp.Diagnostics, "connection", id.ValueString())
		return
	}
	for name, value := range supplied {
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root(name), value)...)
	}
}
