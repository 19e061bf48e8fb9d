package provider

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// TestConnectionUpgradeState: the Python provider's states (versions 1 and 2) read as version 3,
// every attribute they did not have null.
func TestConnectionUpgradeState(t *testing.T) {
	ctx := context.Background()
	server, err := testProviders["inlet"]()
	if err != nil {
		t.Fatal(err)
	}
	v1 := map[string]any{
		"id": "c-1", "name": "secure", "bootstrap_servers": "b:9093", "security_protocol": "SASL_SSL",
		"sasl_mechanism": "PLAIN", "sasl_username": "ingest", "sasl_password": "p", "oauth_client_id": nil,
		"oauth_client_secret": nil, "oauth_token_endpoint_url": nil, "oauth_scope": nil, "ssl_ca_pem": nil,
		"ssl_certificate_pem": nil, "ssl_key_pem": nil, "ssl_key_password": nil, "ssl_endpoint_identification": nil,
		"options": map[string]any{"client.id": "terraform"}, "credentials_version": 3, "credentials_status": "ok",
		"etag": `"e"`,
	}
	v2 := map[string]any{"schema_registry_url": "https://registry.example.com", "schema_registry_username": nil,
		"schema_registry_password": nil, "schema_registry_token": "t", "schema_registry_ca_pem": nil,
		"schema_registry_endpoint_identification": nil}
	for k, v := range v1 {
		v2[k] = v
	}
	stateType := connectionSchema().Type().TerraformType(ctx)
	for version, old := range map[int64]map[string]any{1: v1, 2: v2} {
		raw, _ := json.Marshal(old)
		resp, err := server.UpgradeResourceState(ctx, &tfprotov6.UpgradeResourceStateRequest{
			TypeName: "inlet_connection", Version: version, RawState: &tfprotov6.RawState{JSON: raw},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range resp.Diagnostics {
			t.Errorf("version %d: %s: %s", version, d.Summary, d.Detail)
		}
		if resp.UpgradedState == nil {
			t.Fatalf("version %d: no upgraded state", version)
		}
		value, err := resp.UpgradedState.Unmarshal(stateType)
		if err != nil {
			t.Fatal(err)
		}
		var attrs map[string]tftypes.Value
		if err := value.As(&attrs); err != nil {
			t.Fatal(err)
		}
		str := func(name string) any {
			var s *string
			if err := attrs[name].As(&s); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if s == nil {
				return nil
			}
			return *s
		}
		for name, want := range map[string]any{"id": "c-1", "sasl_password": "p", "etag": `"e"`,
			"sasl_password_wo": nil, "schema_registry_token_wo": nil} {
			if got := str(name); got != want {
				t.Errorf("version %d: %s = %v, want %v", version, name, got, want)
			}
		}
		if got, want := str("schema_registry_token"), old["schema_registry_token"]; got != want {
			t.Errorf("version %d: schema_registry_token = %v, want %v", version, got, want)
		}
		if !attrs["credentials_wo_version"].IsNull() {
			t.Errorf("version %d: credentials_wo_version = %v, want null", version, attrs["credentials_wo_version"])
		}
		var credentialsVersion = attrs["credentials_version"]
		if !credentialsVersion.Equal(tftypes.NewValue(tftypes.Number, 3)) {
			t.Errorf("version %d: credentials_version = %v", version, credentialsVersion)
		}
	}
}
