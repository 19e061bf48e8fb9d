package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccConnectionValidators: configurations Inlet would refuse are errors at plan that name the
// attribute (the data source's too).
func TestAccConnectionValidators(t *testing.T) {
	refused := func(attributes, message string) resource.TestStep {
		return resource.TestStep{
			Config:      fmt.Sprintf("resource \"inlet_connection\" \"c\" {\n%s\n}\n", attributes),
			PlanOnly:    true,
			ExpectError: words(message),
		}
	}
	base := `name = "v"
  bootstrap_servers = "broker-1.example.com:9093"`
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { accPreCheck(t) },
		ProtoV6ProviderFactories: testProviders,
		Steps: []resource.TestStep{
			refused(base+"\n security_protocol = \"TLS\"", "Attribute security_protocol value must be one of"),
			refused(`name = "not a name!"
  bootstrap_servers = "b:1"`, "Attribute name must start with a letter or digit"),
			refused(base+"\n security_protocol = \"SASL_SSL\"\n sasl_mechanism = \"GSSAPI\"", "Attribute sasl_mechanism value must be one of"),
			refused(base+"\n security_protocol = \"SASL_SSL\"", "security_protocol SASL_SSL needs a sasl_mechanism"),
			refused(base+"\n sasl_mechanism = \"PLAIN\"", "sasl_mechanism is only used with SASL_PLAINTEXT or SASL_SSL, not PLAINTEXT"),
			refused(base+"\n ssl_ca_pem = \"x\"", "The ssl_* attributes are only used with SSL or SASL_SSL, not PLAINTEXT"),
			refused(base+"\n security_protocol = \"SSL\"\n ssl_endpoint_identification = \"strict\"",
				"Attribute ssl_endpoint_identification value must be one of"),
			refused(base+"\n security_protocol = \"SASL_SSL\"\n sasl_mechanism = \"OAUTHBEARER\"\n sasl_username = \"u\"\n sasl_password = \"p\"",
				"sasl_mechanism OAUTHBEARER takes credentials with oauth_client_id"),
			refused(base+"\n security_protocol = \"SASL_SSL\"\n sasl_mechanism = \"OAUTHBEARER\"\n oauth_client_id = \"c\"\n"+
				" oauth_client_secret = \"s\"\n oauth_token_endpoint_url = \"ftp://idp\"", "Attribute oauth_token_endpoint_url must be an http"),
			refused(base+"\n schema_registry_username = \"u\"\n schema_registry_password = \"p\"",
				`Attribute "schema_registry_url" must be specified when "schema_registry_username" is specified`),
			refused(base+"\n schema_registry_url = \"https://registry.example.com\"\n schema_registry_username = \"u\"",
				"Registry basic auth needs both schema_registry_username and schema_registry_password"),
			refused(base+"\n schema_registry_url = \"https://registry.example.com\"\n schema_registry_token = \"t\"\n"+
				" schema_registry_username = \"u\"\n schema_registry_password = \"p\"",
				"Give schema_registry_username and schema_registry_password, or schema_registry_token, not both"),
			refused(base+"\n schema_registry_url = \"https://registry.example.com\"\n schema_registry_endpoint_identification = \"off\"",
				"Attribute schema_registry_endpoint_identification value must be one of"),
			refused(base+"\n options = { for i in range(65) : \"o${i}\" => \"v\" }", "Attribute options map must contain at most 64"),
			{
				Config:      `data "inlet_connection" "x" {}`,
				PlanOnly:    true,
				ExpectError: words("Exactly one of these attributes must be configured: [id,name]"),
			},
		},
	})
}
