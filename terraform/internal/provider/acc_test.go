package provider

import (
	"os"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"inlet.dev/terraform-provider-inlet/internal/inlet"
)

// The acceptance tests run the real CLI (TF_ACC_TERRAFORM_PATH: OpenTofu built by make setup) against
// a running Inlet. tests/terraform/test_acceptance.py starts one (real OpenBao, the sandbox Kafka) and
// runs them with:
//
//	TF_ACC=1 INLET_ENDPOINT, INLET_API_KEY (a tenant's admin key)
//	INLET_ACC_BOOTSTRAP   the sandbox Kafka's bootstrap servers
//	INLET_ACC_TOPIC       a topic of two partitions holding 20 records
//	INLET_ACC_CLI_WRITE_ONLY=1 where the CLI has write-only arguments (OpenTofu 1.11+, Terraform 1.11+)
var testProviders = map[string]func() (tfprotov6.ProviderServer, error){
	"inlet": providerserver.NewProtocol6WithError(New("acceptance")()),
}

// accEnv is the named variable; the test fails (never skips) when the harness did not set it.
func accEnv(t *testing.T, name string) string {
	t.Helper()
	value := os.Getenv(name)
	if value == "" && os.Getenv("TF_ACC") != "" {
		t.Fatalf("%s is not set: run the acceptance tests through tests/terraform/test_acceptance.py", name)
	}
	return value
}

func accPreCheck(t *testing.T) {
	t.Helper()
	for _, name := range []string{"INLET_ENDPOINT", "INLET_API_KEY", "INLET_ACC_BOOTSTRAP", "INLET_ACC_TOPIC"} {
		accEnv(t, name)
	}
}

// accClient talks to the harness's Inlet with its admin key: to change things behind Terraform's back.
func accClient(t *testing.T) *inlet.Client {
	t.Helper()
	return inlet.New(accEnv(t, "INLET_ENDPOINT"), accEnv(t, "INLET_API_KEY"), 30*time.Second, "acceptance")
}
