// Package provider is the inlet provider: its configuration, resources and data sources.
package provider

import (
	"context"
	"os"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"inlet.dev/terraform-provider-inlet/internal/inlet"
)

// Address is the provider's source address: what `required_providers` names.
const Address = "inlet.dev/inlet/inlet"

// New returns the provider factory providerserver serves.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &inletProvider{version: version} }
}

type inletProvider struct {
	version string
}

type providerModel struct {
	Endpoint       types.String `tfsdk:"endpoint"`
	APIKey         types.String `tfsdk:"api_key"`
	TimeoutSeconds types.Int64  `tfsdk:"timeout_seconds"`
}

func (p *inletProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "inlet"
	resp.Version = p.version
}

func (p *inletProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Inlet: Kafka connections, pipelines, their offsets, API keys, webhooks and lag alerts.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				Optional:    true,
				Description: "Inlet's base URL, e.g. https://inlet.example.com (default: $INLET_ENDPOINT).",
			},
			"api_key": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "A tenant API key (default: $INLET_API_KEY); inlet_api_key needs the admin role.",
			},
			"timeout_seconds": schema.Int64Attribute{
				Optional:    true,
				Description: "Time allowed for one request to Inlet (default 30).",
				Validators:  []validator.Int64{int64validator.AtLeast(1)},
			},
		},
	}
}

func (p *inletProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var config providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	endpoint := setting(config.Endpoint, "INLET_ENDPOINT")
	apiKey := setting(config.APIKey, "INLET_API_KEY")
	if endpoint == "" {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Inlet's endpoint is not set",
			"Set endpoint in the provider block or INLET_ENDPOINT.")
	}
	if apiKey == "" {
		resp.Diagnostics.AddAttributeError(path.Root("api_key"), "No Inlet API key",
			"Set api_key in the provider block or INLET_API_KEY.")
	}
	if resp.Diagnostics.HasError() {
		return
	}
	timeout := 30 * time.Second
	if !config.TimeoutSeconds.IsNull() && !config.TimeoutSeconds.IsUnknown() {
		timeout = time.Duration(config.TimeoutSeconds.ValueInt64()) * time.Second
	}
	client := inlet.New(endpoint, apiKey, timeout, p.version)
	resp.ResourceData = client
	resp.DataSourceData = client
}

func setting(value types.String, env string) string {
	if !value.IsNull() && !value.IsUnknown() && value.ValueString() != "" {
		return value.ValueString()
	}
	return os.Getenv(env)
}

func (p *inletProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		newConnectionResource,
		newPipelineResource,
		newPipelineOffsetsResource,
		newAPIKeyResource,
		newWebhookResource,
		newLagAlertResource,
	}
}

func (p *inletProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		newConnectionDataSource,
		newPipelineDataSource,
		newPipelineOffsetsDataSource,
		newUsageDataSource,
	}
}
