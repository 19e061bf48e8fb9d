# The least a Vault token needs for Inlet (KV v2 mounted at "secret", INLET_VAULT_PREFIX "inlet").
# With another mount or prefix, change the first segments of each path to match. Inlet needs no
# "default" policy: give its AppRole token_no_default_policy=true and this policy alone.
# The test suite's AppRole uses exactly this file (tests/fixtures/vault.py).

# Write a connection's credentials as a new version, and read the version a run was planned with.
path "secret/data/inlet/tenants/*" {
  capabilities = ["create", "read", "update"]
}

# Read versions (GET /connections shows credentials_status), destroy every version when a
# connection is deleted, and list the tree so orphaned secrets are found and destroyed.
path "secret/metadata/inlet/tenants/*" {
  capabilities = ["read", "list", "delete"]
}

# Readiness (/readyz) asks Vault which of the above the token really has, and names what is missing.
path "sys/capabilities-self" {
  capabilities = ["update"]
}
