package provider

import (
	"context"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// inlet_connection's attributes with the rules Inlet applies to each (openapi.yaml's ConnectionSpec) as
// validators, and ValidateConfig for the rules that span attributes: a bad configuration is an error at
// plan that names the attribute.

var (
	connectionNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	connHTTPURL           = regexp.MustCompile(`^https?://\S+$`)
)

func connectionSchema() schema.Schema {
	optional := func(description string, validators ...validator.String) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, Description: description, Validators: validators}
	}
	sensitive := func(description string, validators ...validator.String) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, Sensitive: true, Description: description, Validators: validators}
	}
	writeOnly := func(twin string, maxLength int) schema.StringAttribute {
		return schema.StringAttribute{
			Optional: true, Sensitive: true, WriteOnly: true,
			Description: "Write-only " + twin + " (OpenTofu and Terraform 1.11+): never in plan or state; sent on " +
				"create and whenever credentials_wo_version changes.",
			Validators: []validator.String{
				stringvalidator.LengthBetween(1, maxLength),
				stringvalidator.ConflictsWith(path.MatchRoot(twin)),
				stringvalidator.AlsoRequires(path.MatchRoot("credentials_wo_version")),
			},
		}
	}
	needsRegistry := stringvalidator.AlsoRequires(path.MatchRoot("schema_registry_url"))
	identification := stringvalidator.OneOf("https", "none")
	return schema.Schema{
		Version: 3, // 2: the schema_registry_* attributes; 3: the write-only arguments
		Description: "A Kafka connection: a cluster, its schema registry and how to reach them. Credentials go to " +
			"Inlet's secret store and never come back; give them as sensitive arguments (kept in state) or, on " +
			"CLIs 1.11+, as write-only ones (*_wo, never in state) with credentials_wo_version.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The connection's id.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, Description: "Unique in the tenant (letters, digits, '.', '_', '-').",
				Validators: []validator.String{stringvalidator.LengthBetween(1, 100),
					stringvalidator.RegexMatches(connectionNamePattern, "must start with a letter or digit and hold only letters, digits, '.', '_' and '-'")}},
			"bootstrap_servers": schema.StringAttribute{Required: true, Description: "host:port[,host:port…]",
				Validators: []validator.String{stringvalidator.LengthBetween(1, 2048)}},
			"security_protocol": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("PLAINTEXT"),
				Description: "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (default PLAINTEXT).",
				Validators:  []validator.String{stringvalidator.OneOf("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}},
			"sasl_mechanism": optional("PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (with SASL_PLAINTEXT or SASL_SSL).",
				stringvalidator.OneOf("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")),
			"sasl_username": optional("Write-only in Inlet: kept in its secret store.", stringvalidator.LengthBetween(1, 256)),
			"sasl_password": sensitive("Write-only in Inlet; kept in state (see sasl_password_wo).",
				stringvalidator.LengthBetween(1, 1024)),
			"sasl_password_wo": writeOnly("sasl_password", 1024),
			"oauth_client_id":  optional("OAUTHBEARER's client id (write-only in Inlet).", stringvalidator.LengthBetween(1, 256)),
			"oauth_client_secret": sensitive("OAUTHBEARER's client secret; kept in state (see oauth_client_secret_wo).",
				stringvalidator.LengthBetween(1, 2048)),
			"oauth_client_secret_wo": writeOnly("oauth_client_secret", 2048),
			"oauth_token_endpoint_url": optional("OAUTHBEARER's token endpoint (http or https).",
				stringvalidator.LengthBetween(1, 2048), stringvalidator.RegexMatches(connHTTPURL, "must be an http:// or https:// URL")),
			"oauth_scope": optional("OAUTHBEARER's scope.", stringvalidator.LengthAtMost(1024)),
			"ssl_ca_pem":  optional("CA bundle that signs the brokers' certificates.", stringvalidator.LengthAtMost(65536)),
			"ssl_certificate_pem": optional("Client certificate (mutual TLS), with ssl_key_pem.",
				stringvalidator.LengthAtMost(65536)),
			"ssl_key_pem": sensitive("The client certificate's private key; kept in state (see ssl_key_pem_wo).",
				stringvalidator.LengthAtMost(65536)),
			"ssl_key_pem_wo": writeOnly("ssl_key_pem", 65536),
			"ssl_key_password": sensitive("The private key's password; kept in state (see ssl_key_password_wo).",
				stringvalidator.LengthAtMost(1024)),
			"ssl_key_password_wo": writeOnly("ssl_key_password", 1024),
			"ssl_endpoint_identification": schema.StringAttribute{Optional: true, Computed: true,
				Description: "https (check the broker's host name, the default) or none.",
				Validators:  []validator.String{identification}},
			"options": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				Description: "librdkafka client options from Inlet's allow-list, e.g. { \"client.id\" = \"terraform\" }.",
				Validators: []validator.Map{mapvalidator.SizeAtMost(64),
					mapvalidator.ValueStringsAre(stringvalidator.LengthAtMost(1024))}},
			"schema_registry_url": optional("The cluster's Confluent-compatible schema registry (http or https, no "+
				"credentials in it), for Avro, Protobuf and JSON Schema values.",
				stringvalidator.LengthBetween(1, 2048), stringvalidator.RegexMatches(connHTTPURL, "must be an http:// or https:// URL")),
			"schema_registry_username": optional("HTTP basic auth to the registry, with schema_registry_password "+
				"(write-only in Inlet).", stringvalidator.LengthBetween(1, 256), needsRegistry),
			"schema_registry_password": sensitive("Kept in state (see schema_registry_password_wo).",
				stringvalidator.LengthBetween(1, 1024), needsRegistry),
			"schema_registry_password_wo": writeOnly("schema_registry_password", 1024),
			"schema_registry_token": sensitive("A bearer token for the registry (instead of username and password); "+
				"kept in state (see schema_registry_token_wo).", stringvalidator.LengthBetween(1, 8192), needsRegistry),
			"schema_registry_token_wo": writeOnly("schema_registry_token", 8192),
			"schema_registry_ca_pem": optional("CA bundle that signs the registry's certificate (https).",
				stringvalidator.LengthAtMost(65536), needsRegistry),
			"schema_registry_endpoint_identification": optional("https (check the registry's host name, the default) or none.",
				identification, needsRegistry),
			"credentials_wo_version": schema.Int64Attribute{Optional: true,
				Description: "Change it to send the write-only arguments (*_wo) again: a rotation, or one added or removed.",
				Validators:  []validator.Int64{int64validator.AtLeast(0)}},
			"credentials_version": schema.Int64Attribute{Computed: true,
				Description: "Version of the stored secret; moves on every rotation."},
			"credentials_status": schema.StringAttribute{Computed: true,
				Description: "ok, missing (the secret version is gone from the store) or unknown; null without credentials."},
			"etag": schema.StringAttribute{Computed: true, Description: "The ETag Terraform sends back as If-Match."},
		},
	}
}

// ValidateConfig says before any request what Inlet would refuse across attributes, and names the
// write-only arguments a CLI without write-only support cannot take.
func (r *connectionResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var config connectionModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !req.ClientCapabilities.WriteOnlyAttributesAllowed {
		for _, name := range connSortedNames(connWriteOnlyTwins) {
			if v := config.str(name); !v.IsNull() {
				resp.Diagnostics.AddAttributeError(path.Root(name), "This CLI has no write-only arguments",
					name+" is write-only, which needs OpenTofu 1.11+ or Terraform 1.11+. On this CLI give "+
						connWriteOnlyTwins[name]+" instead: it is sensitive (never shown) but kept in state.")
			}
		}
	}
	given := func(names ...string) bool {
		for _, name := range names {
			if v := config.str(name); !v.IsNull() {
				return true
			}
		}
		return false
	}
	unknown := func(names ...string) bool {
		for _, name := range names {
			if config.str(name).IsUnknown() {
				return true
			}
		}
		return false
	}
	token := given("schema_registry_token", "schema_registry_token_wo")
	password := given("schema_registry_password", "schema_registry_password_wo")
	username := given("schema_registry_username")
	if token && (username || password) {
		resp.Diagnostics.AddAttributeError(path.Root("schema_registry_token"), "Registry credentials of two kinds",
			"Give schema_registry_username and schema_registry_password, or schema_registry_token, not both.")
	} else if username != password && !unknown("schema_registry_username", "schema_registry_password", "schema_registry_password_wo") {
		resp.Diagnostics.AddAttributeError(path.Root("schema_registry_password"), "Registry basic auth is incomplete",
			"Registry basic auth needs both schema_registry_username and schema_registry_password.")
	}
	for _, name := range []string{"schema_registry_password_wo", "schema_registry_token_wo"} {
		if given(name) && config.RegistryURL.IsNull() {
			resp.Diagnostics.AddAttributeError(path.Root(name), "No schema registry",
				"The schema_registry_* attributes need schema_registry_url.")
		}
	}
	protocol := config.SecurityProtocol
	mechanism := config.SaslMechanism
	if protocol.IsUnknown() || mechanism.IsUnknown() {
		return
	}
	p := protocol.ValueString()
	if protocol.IsNull() {
		p = "PLAINTEXT"
	}
	sasl := strings.HasPrefix(p, "SASL_")
	switch {
	case sasl && mechanism.IsNull():
		resp.Diagnostics.AddAttributeError(path.Root("sasl_mechanism"), "No SASL mechanism",
			"security_protocol "+p+" needs a sasl_mechanism.")
	case !sasl && !mechanism.IsNull():
		resp.Diagnostics.AddAttributeError(path.Root("sasl_mechanism"), "SASL mechanism without SASL",
			"sasl_mechanism is only used with SASL_PLAINTEXT or SASL_SSL, not "+p+".")
	}
	if !strings.HasSuffix(p, "SSL") && given("ssl_ca_pem", "ssl_certificate_pem", "ssl_key_pem", "ssl_key_pem_wo",
		"ssl_key_password", "ssl_key_password_wo", "ssl_endpoint_identification") {
		resp.Diagnostics.AddAttributeError(path.Root("security_protocol"), "TLS settings without TLS",
			"The ssl_* attributes are only used with SSL or SASL_SSL, not "+p+".")
	}
	oauth := given("oauth_client_id", "oauth_client_secret", "oauth_client_secret_wo", "oauth_token_endpoint_url", "oauth_scope")
	plain := given("sasl_username", "sasl_password", "sasl_password_wo")
	if (oauth || plain) && !sasl {
		resp.Diagnostics.AddAttributeError(path.Root("security_protocol"), "Credentials without SASL",
			"SASL credentials are only used with SASL_PLAINTEXT or SASL_SSL, not "+p+".")
	} else if sasl && !mechanism.IsNull() {
		wantsOAuth := mechanism.ValueString() == "OAUTHBEARER"
		if (wantsOAuth && plain) || (!wantsOAuth && oauth) {
			kind := "sasl_username and sasl_password"
			if wantsOAuth {
				kind = "oauth_client_id, oauth_client_secret and oauth_token_endpoint_url"
			}
			resp.Diagnostics.AddAttributeError(path.Root("sasl_mechanism"), "Credentials of another mechanism",
				"sasl_mechanism "+mechanism.ValueString()+" takes credentials with "+kind+".")
		}
	}
}

func connSortedNames(m map[string]string) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
