"""Fast tests (no Spark) of the job contract, range chunking, redaction and the launcher's process handling."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from spark_jobs.errors import JobError, classify
from spark_jobs.kafka_source import Chunk, chunk_ranges
from spark_jobs.spec import RunResult, RunSpec, redact, redacted_config
from worker.launch.submit import SparkSubmitSettings, launch

SECRET = "s3cr3t-Passw0rd"
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"


def spec_dict(**source: object) -> dict:
    return {
        "run_id": "r1",
        "pipeline_id": "p1",
        "txn": {"app_id": "inlet-pipeline-p1", "version": 7},
        "source": {
            "kafka_config": {"bootstrap.servers": "b:9092", "sasl.username": "u", "sasl.password": SECRET, "ssl.key.pem": PEM},
            "ranges": {"orders": {"0": [5, 10], "3": [0, 0]}},
            **source,
        },
        "target": {"type": "kafka", "kafka_config": {"bootstrap.servers": "c:9092", "sasl.password": "other-secret"}, "topic": "out"},
    }


def test_spec_round_trips_and_lists_its_secrets() -> None:
    spec = RunSpec.model_validate(spec_dict(value_format="json", schema="id INT, name STRING"))
    again = RunSpec.from_json(spec.to_json())
    assert again == spec
    assert again.source.schema_ == "id INT, name STRING" and '"schema":"id INT, name STRING"' in spec.to_json()
    assert again.source.ranges == {"orders": {"0": (5, 10), "3": (0, 0)}}
    assert again.target.type == "kafka"
    assert set(spec.secret_values()) == {SECRET, "other-secret", PEM, "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
                                         "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----"}
    assert redacted_config(spec.source.kafka_config) == {
        "bootstrap.servers": "b:9092", "sasl.username": "u", "sasl.password": "***", "ssl.key.pem": "***"
    }
    line = f"conf sasl.password={SECRET} key line MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"
    assert redact(line, spec.secret_values()) == "conf sasl.password=*** key line ***"


def test_the_object_stores_credentials_are_secrets_of_the_spec() -> None:
    options = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG", "AWS_SESSION_TOKEN": "FwoGZXIvYXdzEJr"}
    spec = RunSpec.model_validate({**spec_dict(), "target": {"type": "delta", "uri": "s3://b/t", "storage_options": options}})

    assert {"wJalrXUtnFEMI/K7MDENG", "FwoGZXIvYXdzEJr"} <= set(spec.secret_values())
    assert redact(f"options {options}", spec.secret_values()).count("***") == 2
    assert spec.target.store.options == options


def test_azure_and_gcs_credentials_are_secrets_of_the_spec_and_hidden_where_options_are_logged() -> None:
    private_key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcw\nAoIBAQC7VJTUt9Us8cKj\n-----END PRIVATE KEY-----\n"
    service_account = json.dumps({"type": "service_account", "client_email": "a@p.iam.gserviceaccount.com",
                                  "private_key": private_key})
    options = {"AZURE_STORAGE_ACCOUNT_NAME": "lake", "AZURE_STORAGE_ACCOUNT_KEY": "YWNjb3VudC1rZXk=",
               "access_key": "YWNjZXNzLWtleQ==", "AZURE_STORAGE_SAS_TOKEN": "sv=2024&sig=abc", "sas_key": "sv=2025&sig=def",
               "AZURE_CLIENT_ID": "app-id", "AZURE_CLIENT_SECRET": "client-secret-value", "AZURE_TENANT_ID": "tenant",
               "GOOGLE_SERVICE_ACCOUNT_KEY": service_account}
    spec = RunSpec.model_validate({**spec_dict(), "target": {"type": "delta", "uri": "abfss://c@lake.dfs.core.windows.net/t",
                                                             "storage_options": options}})

    of_kafka = set(RunSpec.model_validate(spec_dict()).secret_values())
    assert set(spec.secret_values()) - of_kafka == {
        "YWNjb3VudC1rZXk=", "YWNjZXNzLWtleQ==", "sv=2024&sig=abc", "sv=2025&sig=def", "client-secret-value",
        service_account, private_key, "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcw", "AoIBAQC7VJTUt9Us8cKj"}
    # A log line showing the key unescaped, as a library might, keeps none of it.
    assert redact(f"key: {private_key}", spec.secret_values()) == "key: ***"
    assert redacted_config(options) == {**options, "AZURE_STORAGE_ACCOUNT_KEY": "***", "access_key": "***",
                                        "AZURE_STORAGE_SAS_TOKEN": "***", "sas_key": "***", "AZURE_CLIENT_SECRET": "***",
                                        "GOOGLE_SERVICE_ACCOUNT_KEY": "***"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ranges": {"t": {"0": [9, 3]}}}, "0 <= start <= end"),
        ({"ranges": {"t": {"x": [0, 3]}}}, "not a partition number"),
        ({"value_format": "json"}, "needs a schema"),
        ({"value_format": "json", "schema": "n INT", "key_format": "string"}, "key_format is not used with value_format json"),
        ({"on_data_loss": "ignore"}, "on_data_loss"),
        ({"max_records_per_task": 0}, "max_records_per_task"),
    ],
)
def test_spec_rejects_invalid_sources(change: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        RunSpec.model_validate(spec_dict(**change))


_DELTA = {"type": "delta", "uri": "/t", "quarantine_uri": "/t__quarantine"}
_JSON = {"value_format": "json", "schema": "n INT", "ranges": {}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"source": {**spec_dict()["source"], "value_format": "string", "ranges": {}}}, "replays the quarantine of"),
        ({"target": {**_DELTA, "mode": "upsert", "key": ["n"]}}, "replays the quarantine of"),
        ({"target": spec_dict()["target"]}, "replays the quarantine of"),
        ({"source": {**spec_dict()["source"], **_JSON, "ranges": {"t": {"0": [0, 5]}}}}, "source.ranges must be empty"),
    ],
)
def test_a_reprocess_replays_a_delta_append_tables_quarantine_and_reads_no_kafka(change: dict, message: str) -> None:
    good = {**spec_dict(**_JSON), "target": _DELTA, "reprocess": {"dry_run": True}}
    assert RunSpec.model_validate(good).reprocess is not None

    with pytest.raises(ValidationError, match=message):
        RunSpec.model_validate({**good, **change})


def test_the_field_key_goes_with_sensitive_fields_or_a_reprocess() -> None:
    base = {**spec_dict(**_JSON), "target": _DELTA}
    key = {"field_key": "a2V5"}
    hashed = {"sensitive": [{"field": "n", "action": "hash"}]}
    assert RunSpec.model_validate({**base, "contract": {**hashed, **key}}).contract.field_key == "a2V5"
    assert RunSpec.model_validate({**base, "contract": key, "reprocess": {}}).contract.field_key == "a2V5"
    with pytest.raises(ValidationError, match="sensitive fields need contract.field_key"):
        RunSpec.model_validate({**base, "contract": hashed})
    with pytest.raises(ValidationError, match="goes with sensitive fields or a reprocess"):
        RunSpec.model_validate({**base, "contract": key})


def test_result_round_trips() -> None:
    text = """{"run_id": "r1", "status": "failed", "partitions": [{"topic": "t", "partition": 2, "start": 0,
      "end": 10, "records_read": 4, "first_offset": 6, "last_offset": 9, "gap": [0, 6]}],
      "timings": {"started_at": "2025-01-01T00:00:00Z", "finished_at": "2025-01-01T00:00:20Z"},
      "error": {"kind": "data_loss", "message": "m", "topic": "t", "partition": 2}}"""
    result = RunResult.from_json(text)
    assert result.partitions[0].gap == (0, 6) and result.error is not None and result.error.kind == "data_loss"
    assert RunResult.from_json(result.to_json()) == result


def test_chunking_splits_ranges_evenly_and_skips_empty_ones() -> None:
    chunks = chunk_ranges({"b": {"10": (0, 10)}, "a": {"2": (100, 125), "1": (5, 5)}}, max_records_per_task=10)
    assert chunks == [
        Chunk("a", 2, 100, 108), Chunk("a", 2, 108, 116), Chunk("a", 2, 116, 125), Chunk("b", 10, 0, 10),
    ]


def test_job_errors_survive_a_trip_through_exception_text() -> None:
    wrapped = RuntimeError("Py4JJavaError: ... PythonException:\n  " + str(JobError("kafka_auth", "SASL failed", "t", 3)) + "\n at ...")
    error = classify(wrapped)
    assert (error.kind, error.message, error.topic, error.partition) == ("kafka_auth", "SASL failed", "t", 3)
    assert classify(ValueError("boom")).kind == "internal"


def fake_spark_submit(tmp_path: Path, body: str) -> SparkSubmitSettings:
    """A stand-in spark-submit (a shell script): these tests are about process handling, not Spark."""
    script = tmp_path / "spark-submit"
    script.write_text("#!/bin/bash\n" + body)
    script.chmod(0o755)
    return SparkSubmitSettings(spark_submit=str(script), python=sys.executable)


def test_launcher_passes_spec_as_private_file_and_redacts_logs(tmp_path: Path) -> None:
    # The fake job prints its argv and the spec file, then writes a result.
    settings = fake_spark_submit(
        tmp_path,
        'echo "argv: $*"; spec=${@: -3:1}; stat -c "mode %a" "$spec"; cat "$spec"; echo; '
        'result=${@: -1}; printf \'{"run_id":"r1","status":"succeeded","timings":{"started_at":"2025-01-01T00:00:00Z",'
        '"finished_at":"2025-01-01T00:00:01Z"}}\' > "$result"\n',
    )
    lines: list[str] = []
    spec = RunSpec.model_validate(spec_dict())
    result = launch(spec, workdir=tmp_path / "work", settings=settings, timeout_s=30, on_log_line=lines.append)
    assert result.status == "succeeded" and result.run_id == "r1"
    text = "\n".join(lines)
    assert "mode 600" in text and '"sasl.password":"***"' in text
    assert SECRET not in text and "other-secret" not in text and "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" not in text
    argv = next(line for line in lines if line.startswith("argv: "))
    assert "spark.ui.enabled=false" in argv and f"spark.pyspark.python={sys.executable}" in argv and "--py-files" in argv
    assert not list((tmp_path / "work").glob("spec-*")), "the spec file (secrets) outlives the run"


def test_launcher_reports_crash_timeout_and_cancel(tmp_path: Path) -> None:
    spec = RunSpec.model_validate(spec_dict())
    crashed = launch(spec, workdir=tmp_path, settings=fake_spark_submit(tmp_path, f"echo {SECRET} >&2; exit 3\n"), timeout_s=30, on_log_line=None)
    assert crashed.status == "failed" and crashed.error is not None and crashed.error.kind == "crashed"
    assert "exited 3" in crashed.error.message and SECRET not in crashed.error.message and "***" in crashed.error.message

    # The sleep is a grandchild, as Spark's JVM and Python workers are: the whole group must go.
    sleeper = fake_spark_submit(tmp_path, "sleep 300 & wait\n")
    timed_out = launch(spec, workdir=tmp_path, settings=sleeper, timeout_s=1, on_log_line=None)
    assert timed_out.error is not None and timed_out.error.kind == "timeout"

    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    cancelled = launch(spec, workdir=tmp_path, settings=sleeper, timeout_s=60, on_log_line=None, cancel=cancel)
    assert cancelled.error is not None and cancelled.error.kind == "cancelled"
