package provider

// Version is the provider's release: the mirror's and the registry's version, and what
// `required_providers` pins. main.version (set at build time) reports the build.
const Version = "0.2.0"
