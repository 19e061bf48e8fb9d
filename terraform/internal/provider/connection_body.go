package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"inlet.dev/terraform-provider-inlet/internal/inlet"
)

// What a create or an update sends Inlet (the plan, with the write-only values of the configuration)
// and the state Inlet's answer gives. The names of the write-only arguments the last apply sent are kept
// in private state: an update removes one no longer given, and Read sees a secret that is not theirs.

// connInputs is what a create or an update sends: the plan, with the write-only values the
// configuration holds (they are null in the plan).
type connInputs struct {
	plan, config *connectionModel
}

// value is the attribute's planned value, or its write-only twin's configured one.
func (in connInputs) value(name string) types.String {
	if v := in.plan.str(name); !v.IsNull() {
		return v
	}
	if _, ok := connWriteOnlyTwins[name+"_wo"]; ok {
		return in.config.str(name + "_wo")
	}
	return types.StringNull()
}

func (in connInputs) anyGiven(names ...string) bool {
	for _, name := range names {
		if !in.value(name).IsNull() {
			return true
		}
	}
	return false
}

func (in connInputs) json(name string) any { return connJSONString(in.value(name)) }

func connJSONString(v types.String) any {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	return v.ValueString()
}

// connWriteOnlyGiven are the write-only arguments the configuration sets.
func connWriteOnlyGiven(config *connectionModel) map[string]bool {
	given := map[string]bool{}
	for name := range connWriteOnlyTwins {
		if !config.str(name).IsNull() {
			given[name] = true
		}
	}
	return given
}

// connPartOf is the index in secretParts of the part an argument (or its write-only twin) is in; -1 for none.
func connPartOf(name string) int {
	name = strings.TrimSuffix(name, "_wo")
	for i, part := range secretParts {
		for _, n := range part {
			if n == name {
				return i
			}
		}
	}
	return -1
}

// connChangedParts says which parts of the secret an update sends: those whose attributes changed, and
// when credentials_wo_version moved, those a write-only argument gives now or gave at the last apply
// (so that removing one, with the version, removes it from Inlet).
func connChangedParts(in connInputs, prior *connectionModel, sentWriteOnly map[string]bool) func(part int) bool {
	return func(part int) bool {
		if prior == nil {
			return true
		}
		for _, name := range secretParts[part] {
			if !in.plan.str(name).Equal(prior.str(name)) {
				return true
			}
		}
		if in.plan.CredentialsWOVersion.Equal(prior.CredentialsWOVersion) {
			return false
		}
		for name := range connWriteOnlyTwins {
			if connPartOf(name) == part && (!in.config.str(name).IsNull() || sentWriteOnly[name]) {
				return true
			}
		}
		return false
	}
}

// connectionBody is the connection as Inlet takes it (ConnectionSpec); prior is nil for a create.
func connectionBody(ctx context.Context, in connInputs, prior *connectionModel, sentWriteOnly map[string]bool) (map[string]any, error) {
	plan := in.plan
	options := map[string]any{}
	if !plan.Options.IsNull() && !plan.Options.IsUnknown() {
		values := map[string]types.String{}
		if d := plan.Options.ElementsAs(ctx, &values, false); d.HasError() {
			return nil, fmt.Errorf("options: %v", d)
		}
		for k, v := range values {
			options[k] = v.ValueString()
		}
	}
	body := map[string]any{
		"name": plan.Name.ValueString(), "bootstrap_servers": plan.BootstrapServers.ValueString(),
		"sasl_mechanism": connJSONString(plan.SaslMechanism), "options": options,
	}
	if !plan.SecurityProtocol.IsNull() && !plan.SecurityProtocol.IsUnknown() {
		body["security_protocol"] = plan.SecurityProtocol.ValueString()
	}
	changed := connChangedParts(in, prior, sentWriteOnly)

	if changed(clusterPart) {
		var credentials map[string]any
		switch {
		case in.anyGiven("oauth_client_id", "oauth_client_secret", "oauth_token_endpoint_url", "oauth_scope"):
			credentials = map[string]any{"client_id": in.json("oauth_client_id"), "client_secret": in.json("oauth_client_secret"),
				"token_endpoint_url": in.json("oauth_token_endpoint_url")}
			if !in.value("oauth_scope").IsNull() {
				credentials["scope"] = in.json("oauth_scope")
			}
		case in.anyGiven("sasl_username", "sasl_password"):
			credentials = map[string]any{"username": in.json("sasl_username"), "password": in.json("sasl_password")}
		}
		if credentials != nil || prior != nil {
			body["credentials"] = credentials
		}
	}

	ssl := map[string]any{}
	for _, name := range []string{"ca_pem", "certificate_pem", "endpoint_identification"} {
		if v := plan.str("ssl_" + name); !v.IsNull() && !v.IsUnknown() {
			ssl[name] = v.ValueString()
		}
	}
	if changed(sslKeyPart) && (in.anyGiven(secretParts[sslKeyPart]...) || prior != nil) {
		ssl["key_pem"] = in.json("ssl_key_pem")
		ssl["key_password"] = in.json("ssl_key_password")
	}
	// Without TLS settings and key, null: that also removes a stored key.
	body["ssl"] = nil
	for _, v := range ssl {
		if v != nil {
			body["ssl"] = ssl
		}
	}

	body["schema_registry"] = nil
	if !plan.RegistryURL.IsNull() {
		registry := map[string]any{"url": plan.RegistryURL.ValueString()}
		for _, name := range []string{"ca_pem", "endpoint_identification"} {
			if v := plan.str("schema_registry_" + name); !v.IsNull() && !v.IsUnknown() {
				registry[name] = v.ValueString()
			}
		}
		if changed(registryPart) {
			switch {
			case in.anyGiven("schema_registry_token"):
				registry["credentials"] = map[string]any{"token": in.json("schema_registry_token")}
			case in.anyGiven("schema_registry_username", "schema_registry_password"):
				registry["credentials"] = map[string]any{"username": in.json("schema_registry_username"),
					"password": in.json("schema_registry_password")}
			case prior != nil:
				registry["credentials"] = nil
			}
		}
		body["schema_registry"] = registry
	}
	return body, nil
}

// connectionAnswer is ConnectionRead.
type connectionAnswer struct {
	ID               string  `json:"id"`
	Name             string  `json:"name"`
	BootstrapServers string  `json:"bootstrap_servers"`
	SecurityProtocol string  `json:"security_protocol"`
	SaslMechanism    *string `json:"sasl_mechanism"`
	SSL              *struct {
		CaPem                  *string `json:"ca_pem"`
		CertificatePem         *string `json:"certificate_pem"`
		EndpointIdentification *string `json:"endpoint_identification"`
		HasKey                 bool    `json:"has_key"`
	} `json:"ssl"`
	Options        json.RawMessage `json:"options"`
	SchemaRegistry *struct {
		URL                    string  `json:"url"`
		CaPem                  *string `json:"ca_pem"`
		EndpointIdentification string  `json:"endpoint_identification"`
		Auth                   string  `json:"auth"`
	} `json:"schema_registry"`
	HasCredentials     bool    `json:"has_credentials"`
	CredentialsVersion *int64  `json:"credentials_version"`
	CredentialsStatus  *string `json:"credentials_status"`
}

func connString(s *string) types.String {
	if s == nil {
		return types.StringNull()
	}
	return types.StringValue(*s)
}

func (a *connectionAnswer) registryAuth() string {
	if a.SchemaRegistry == nil {
		return ""
	}
	return a.SchemaRegistry.Auth
}

func (a *connectionAnswer) sslHasKey() bool { return a.SSL != nil && a.SSL.HasKey }

// sameSecret says whether Inlet's secret is still the version known holds (or known holds none).
func (a *connectionAnswer) sameSecret(known *connectionModel) bool {
	if known.CredentialsVersion.IsNull() || known.CredentialsVersion.IsUnknown() {
		return true
	}
	return a.CredentialsVersion != nil && *a.CredentialsVersion == known.CredentialsVersion.ValueInt64()
}

// connRegistryAuth is the registry credentials known gives (with the write-only ones in
// writeOnly): none, basic or bearer, as Inlet names them.
func connRegistryAuth(known *connectionModel, writeOnly map[string]bool) string {
	if !known.RegistryToken.IsNull() || writeOnly["schema_registry_token_wo"] {
		return "bearer"
	}
	if !known.RegistryUsername.IsNull() || !known.RegistryPassword.IsNull() || writeOnly["schema_registry_password_wo"] {
		return "basic"
	}
	return "none"
}

// connectionState is the state of Inlet's view of the connection, with the secrets known still
// holds unless Inlet says they were removed or replaced outside Terraform.
func connectionState(ctx context.Context, a *connectionAnswer, etag string, known *connectionModel, writeOnly map[string]bool) (connectionModel, error) {
	var s connectionModel
	s.connectionWriteOnly = connectionWriteOnly{
		SaslPasswordWO: types.StringNull(), OAuthClientSecretWO: types.StringNull(), SslKeyPemWO: types.StringNull(),
		SslKeyPasswordWO: types.StringNull(), RegistryPasswordWO: types.StringNull(), RegistryTokenWO: types.StringNull(),
		CredentialsWOVersion: known.CredentialsWOVersion,
	}
	s.ID = types.StringValue(a.ID)
	s.Name = types.StringValue(a.Name)
	s.BootstrapServers = types.StringValue(a.BootstrapServers)
	s.SecurityProtocol = types.StringValue(a.SecurityProtocol)
	s.SaslMechanism = connString(a.SaslMechanism)
	s.SslCaPem, s.SslCertificatePem, s.SslEndpointIdentification = types.StringNull(), types.StringNull(), types.StringNull()
	if a.SSL != nil {
		s.SslCaPem = connString(a.SSL.CaPem)
		s.SslCertificatePem = connString(a.SSL.CertificatePem)
		s.SslEndpointIdentification = connString(a.SSL.EndpointIdentification)
	}
	s.Options = types.MapNull(types.StringType)
	if len(a.Options) > 0 {
		raw, err := decodeJSON(a.Options)
		if err != nil {
			return s, fmt.Errorf("options: %w", err)
		}
		if fields, ok := raw.(map[string]any); ok && len(fields) > 0 {
			v, err := fromJSON(ctx, raw, types.MapType{ElemType: types.StringType})
			if err != nil {
				return s, fmt.Errorf("options: %w", err)
			}
			s.Options = v.(types.Map)
		}
	}
	if s.Options.IsNull() && !known.Options.IsNull() && !known.Options.IsUnknown() && len(known.Options.Elements()) == 0 {
		s.Options = known.Options // options = {} reads back as written
	}
	s.CredentialsVersion = types.Int64PointerValue(a.CredentialsVersion)
	s.CredentialsStatus = connString(a.CredentialsStatus)
	s.ETag = types.StringValue(etag)

	same := a.sameSecret(known)
	keep := func(names []string, kept bool) {
		for _, name := range names {
			if kept {
				*s.byName()[name] = known.str(name)
			} else {
				*s.byName()[name] = types.StringNull()
			}
		}
	}
	keep(secretParts[clusterPart], same && a.HasCredentials)
	keep(secretParts[sslKeyPart], same && a.sslHasKey())

	s.RegistryURL, s.RegistryCaPem, s.RegistryEndpointIdentification = types.StringNull(), types.StringNull(), types.StringNull()
	if r := a.SchemaRegistry; r != nil {
		s.RegistryURL = types.StringValue(r.URL)
		s.RegistryCaPem = connString(r.CaPem)
		// Not computed, so that removing the registry plans cleanly: Inlet's default reads back as the
		// configuration's null, anything else as itself.
		if r.EndpointIdentification != "https" || !known.RegistryEndpointIdentification.IsNull() {
			s.RegistryEndpointIdentification = types.StringValue(r.EndpointIdentification)
		}
	}
	keep(secretParts[registryPart], same && connRegistryAuth(known, writeOnly) == a.registryAuth())
	return s, nil
}

// connWriteOnlyDrifted says whether the secret Inlet holds is no longer what the write-only arguments
// of the last apply (sent) gave: a rotation outside Terraform, or a part removed.
func connWriteOnlyDrifted(a *connectionAnswer, known *connectionModel, sent map[string]bool) bool {
	if !a.sameSecret(known) {
		return true
	}
	if (sent["sasl_password_wo"] || sent["oauth_client_secret_wo"]) && !a.HasCredentials {
		return true
	}
	if (sent["ssl_key_pem_wo"] || sent["ssl_key_password_wo"]) && !a.sslHasKey() {
		return true
	}
	if sent["schema_registry_password_wo"] || sent["schema_registry_token_wo"] {
		return connRegistryAuth(known, sent) != a.registryAuth()
	}
	return false
}

// connPrivateWriteOnly is the private-state key of the write-only arguments the last apply sent.
const connPrivateWriteOnly = "write_only"

func connDecodeSent(raw []byte) map[string]bool {
	var names []string
	sent := map[string]bool{}
	if len(raw) > 0 && json.Unmarshal(raw, &names) == nil {
		for _, n := range names {
			sent[n] = true
		}
	}
	return sent
}

func connEncodeSent(given map[string]bool) []byte {
	names := make([]string, 0, len(given))
	for n := range given {
		names = append(names, n)
	}
	sort.Strings(names)
	raw, _ := json.Marshal(names)
	return raw
}

func decodeConnection(body []byte) (*connectionAnswer, error) {
	var a connectionAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("Inlet's answer could not be read: %w", err)
	}
	return &a, nil
}

// connAppliedState is the state after a create or an update of plan: Inlet's answer, with the secrets
// the plan holds (the version just written is theirs).
func connAppliedState(ctx context.Context, answer *inlet.Answer, plan *connectionModel, sent map[string]bool) (connectionModel, error) {
	a, err := decodeConnection(answer.Body)
	if err != nil {
		return connectionModel{}, err
	}
	known := *plan
	known.CredentialsVersion = types.Int64Null()
	return connectionState(ctx, a, answer.ETag, &known, sent)
}
