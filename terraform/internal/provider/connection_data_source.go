package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/datasourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// connectionDataSource is the inlet_connection data source: a connection, read-only, by id or by name.
type connectionDataSource struct {
	withDataClient
}

var (
	_ datasource.DataSourceWithConfigure        = (*connectionDataSource)(nil)
	_ datasource.DataSourceWithConfigValidators = (*connectionDataSource)(nil)
)

func newConnectionDataSource() datasource.DataSource { return &connectionDataSource{} }

type connectionDataModel struct {
	ID                        types.String `tfsdk:"id"`
	Name                      types.String `tfsdk:"name"`
	BootstrapServers          types.String `tfsdk:"bootstrap_servers"`
	SecurityProtocol          types.String `tfsdk:"security_protocol"`
	SaslMechanism             types.String `tfsdk:"sasl_mechanism"`
	SslCaPem                  types.String `tfsdk:"ssl_ca_pem"`
	SslCertificatePem         types.String `tfsdk:"ssl_certificate_pem"`
	SslEndpointIdentification types.String `tfsdk:"ssl_endpoint_identification"`
	Options                   types.Map    `tfsdk:"options"`
	RegistryURL               types.String `tfsdk:"schema_registry_url"`
	RegistryAuth              types.String `tfsdk:"schema_registry_auth"`
	HasCredentials            types.Bool   `tfsdk:"has_credentials"`
	CredentialsVersion        types.Int64  `tfsdk:"credentials_version"`
	CredentialsStatus         types.String `tfsdk:"credentials_status"`
}

func (d *connectionDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_connection"
}

func (d *connectionDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computed := func(description string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: description}
	}
	resp.Schema = schema.Schema{
		Description: "A connection, by id or by name (credentials are never shown: see has_credentials).",
		Attributes: map[string]schema.Attribute{
			"id":                          schema.StringAttribute{Optional: true, Computed: true, Description: "The connection's id (or give name)."},
			"name":                        schema.StringAttribute{Optional: true, Computed: true, Description: "The connection's name (or give id)."},
			"bootstrap_servers":           computed("host:port[,host:port…]"),
			"security_protocol":           computed("PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."),
			"sasl_mechanism":              computed("PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or null."),
			"ssl_ca_pem":                  computed("CA bundle that signs the brokers' certificates."),
			"ssl_certificate_pem":         computed("Client certificate (mutual TLS)."),
			"ssl_endpoint_identification": computed("https or none; null without TLS settings."),
			"options": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				Description: "librdkafka client options, as text."},
			"schema_registry_url":  computed("Null without a schema registry."),
			"schema_registry_auth": computed("none, basic or bearer."),
			"has_credentials":      schema.BoolAttribute{Computed: true, Description: "Whether Inlet holds a secret for it."},
			"credentials_version":  schema.Int64Attribute{Computed: true, Description: "Version of the stored secret."},
			"credentials_status":   computed("ok, missing or unknown; null without credentials."),
		},
	}
}

func (d *connectionDataSource) ConfigValidators(context.Context) []datasource.ConfigValidator {
	return []datasource.ConfigValidator{datasourcevalidator.ExactlyOneOf(path.MatchRoot("id"), path.MatchRoot("name"))}
}

func (d *connectionDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	const action = "Reading the connection"
	var config connectionDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body, ok := findByIDOrName(ctx, d.client, "connection", "/connections", config.ID, config.Name, &resp.Diagnostics)
	if !ok {
		return
	}
	a, err := decodeConnection(body)
	if err != nil {
		resp.Diagnostics.AddError(action, err.Error())
		return
	}
	// The resource's view of the same answer, without any secret.
	var none connectionModel
	none.Options = types.MapNull(types.StringType)
	view, err := connectionState(ctx, a, "", &none, nil)
	if err != nil {
		resp.Diagnostics.AddError(action, err.Error())
		return
	}
	state := connectionDataModel{
		ID: view.ID, Name: view.Name, BootstrapServers: view.BootstrapServers, SecurityProtocol: view.SecurityProtocol,
		SaslMechanism: view.SaslMechanism, SslCaPem: view.SslCaPem, SslCertificatePem: view.SslCertificatePem,
		SslEndpointIdentification: view.SslEndpointIdentification, Options: view.Options, RegistryURL: view.RegistryURL,
		RegistryAuth: types.StringNull(), HasCredentials: types.BoolValue(a.HasCredentials),
		CredentialsVersion: view.CredentialsVersion, CredentialsStatus: view.CredentialsStatus,
	}
	if state.Options.IsNull() {
		state.Options = types.MapValueMust(types.StringType, map[string]attr.Value{})
	}
	if a.SchemaRegistry != nil {
		state.RegistryAuth = types.StringValue(a.SchemaRegistry.Auth)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}
