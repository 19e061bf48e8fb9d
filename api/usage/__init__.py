"""Usage: what each tenant's pipelines read, wrote and ran, per hour, as a ledger that only grows."""
