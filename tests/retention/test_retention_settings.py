"""The retention settings: their defaults, 0 keeping forever, and every bad value a start-up error that
names the setting."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from api.core.config import Settings
from api.retention.service import TABLES, RetentionPolicy


def test_the_defaults_and_what_zero_means(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = RetentionPolicy.of(Settings())
    assert policy.keep == {"run_logs": timedelta(days=14), "runs": timedelta(days=90),
                           "continuous_runs": timedelta(days=2),
                           "webhook_deliveries": timedelta(days=30), "webhook_events": timedelta(days=30),
                           "audit_events": timedelta(days=365), "idempotency_keys": timedelta(days=1)}
    assert (policy.batch_size, policy.budget_s, policy.interval_s) == (1000, 1.0, 600.0)
    assert [t.name for t in TABLES] == list(policy.keep)  # every table has its setting

    monkeypatch.setenv("INLET_RETENTION_RUNS_DAYS", "0")
    monkeypatch.setenv("INLET_RETENTION_AUDIT_DAYS", "2.5")
    policy = RetentionPolicy.of(Settings())
    assert policy.keep["runs"] is None and policy.keep["audit_events"] == timedelta(days=2.5)


@pytest.mark.parametrize(("name", "value"), [
    ("INLET_RETENTION_RUNS_DAYS", "-1"),
    ("INLET_RETENTION_RUN_LOGS_DAYS", "0.5"),  # shorter than a day
    ("INLET_RETENTION_AUDIT_DAYS", "nan"),
    ("INLET_RETENTION_WEBHOOKS_DAYS", "inf"),
    ("INLET_RETENTION_IDEMPOTENCY_DAYS", "a week"),
    ("INLET_RETENTION_BATCH_SIZE", "0"),
    ("INLET_RETENTION_BATCH_SIZE", "1000000"),
    ("INLET_RETENTION_BUDGET_S", "0"),
    ("INLET_RETENTION_INTERVAL_S", "-5"),
])
def test_a_bad_value_stops_start_up_naming_the_setting(monkeypatch: pytest.MonkeyPatch, name: str,
                                                       value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as refused:
        Settings()
    field = name.removeprefix("INLET_").lower()
    assert [error["loc"] for error in refused.value.errors()] == [(field,)]
    if name.endswith("_DAYS") and value != "a week":
        assert name in str(refused.value) and "0 (keep forever) or at least 1 day" in str(refused.value)
