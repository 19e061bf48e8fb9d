"""INLET_STORAGE_ROOT on ADLS Gen2 and GCS: the options every process gets, and a root no process
could reach stopping start-up with a message that names what to set (api/core/object_storage.py)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from pydantic import ValidationError

from api.core.config import Settings
from api.core.errors import ValidationFailed
from api.pipelines.storage import resolve_delta_uri

ABFSS = "abfss://lake@acct.dfs.core.windows.net/inlet"
KEY = json.dumps({"type": "service_account", "client_email": "inlet@p.iam.gserviceaccount.com",
                  "private_key": "-----BEGIN PRIVATE KEY-----\nMII\n-----END PRIVATE KEY-----\n"})


@pytest.fixture(autouse=True)
def _no_ambient_storage_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith(("AWS_", "AZURE_", "GOOGLE_", "INLET_STORAGE"))]:
        monkeypatch.delenv(name)


def _refusal(**settings: object) -> str:
    with pytest.raises(ValidationError) as refused:
        Settings(**settings)  # type: ignore[arg-type]
    return str(refused.value.errors()[0]["msg"])


@pytest.mark.parametrize("credentials", [
    {"AZURE_STORAGE_ACCOUNT_KEY": "a2V5"},
    {"AZURE_STORAGE_SAS_TOKEN": "sv=2024&sig=x"},
    {"AZURE_CLIENT_ID": "app", "AZURE_CLIENT_SECRET": "s", "AZURE_TENANT_ID": "t"},
], ids=["account key", "SAS token", "service principal"])
def test_adls_takes_an_account_key_a_sas_token_or_a_service_principal_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, credentials: dict[str, str]
) -> None:
    for name, value in credentials.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-for-azure")
    monkeypatch.setenv("INLET_STORAGE_OPTIONS", '{"AZURE_STORAGE_ENDPOINT": "https://lake.internal"}')

    assert Settings(storage_root=ABFSS).resolved_storage_options == {**credentials,
                                                                      "AZURE_STORAGE_ENDPOINT": "https://lake.internal"}


def test_adls_without_credentials_or_with_half_a_service_principal_fails_at_start_up(monkeypatch) -> None:
    assert _refusal(storage_root=ABFSS) == (
        f"Value error, INLET_STORAGE_ROOT={ABFSS} needs Azure credentials, in the environment or INLET_STORAGE_OPTIONS: "
        "AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_SAS_TOKEN, or a service principal "
        "(AZURE_CLIENT_ID, AZURE_CLIENT_SECRET, AZURE_TENANT_ID)")
    monkeypatch.setenv("AZURE_CLIENT_ID", "app")
    assert _refusal(storage_root=ABFSS) == (
        f"Value error, INLET_STORAGE_ROOT={ABFSS}: a service principal needs AZURE_CLIENT_ID, AZURE_CLIENT_SECRET and "
        "AZURE_TENANT_ID; AZURE_CLIENT_SECRET, AZURE_TENANT_ID missing")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", "a2V5")
    assert _refusal(storage_root="az://lake/inlet") == (
        "Value error, INLET_STORAGE_ROOT=az://lake/inlet: az:// needs the account's name in AZURE_STORAGE_ACCOUNT_NAME")
    assert _refusal(storage_root="abfss://lake/inlet") == (
        "Value error, INLET_STORAGE_ROOT=abfss://lake/inlet: give abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "acct")
    assert Settings(storage_root="az://lake/inlet").resolved_storage_options["AZURE_STORAGE_ACCOUNT_NAME"] == "acct"


def test_gcs_takes_a_service_account_key_and_a_key_file_travels_as_its_content(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("INLET_STORAGE_OPTIONS", json.dumps({"GOOGLE_SERVICE_ACCOUNT_KEY": KEY}))
    assert Settings(storage_root="gs://lake/inlet").resolved_storage_options == {"GOOGLE_SERVICE_ACCOUNT_KEY": KEY}

    monkeypatch.delenv("INLET_STORAGE_OPTIONS")
    key_file = tmp_path / "sa.json"
    key_file.write_text(KEY)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
    # The executors of a cluster have no such file: the key itself goes in the job's private spec.
    assert Settings(storage_root="gs://lake/inlet").resolved_storage_options == {"GOOGLE_SERVICE_ACCOUNT_KEY": KEY}


def test_gcs_without_a_usable_key_fails_at_start_up(monkeypatch, tmp_path: Path) -> None:
    root = "gs://lake/inlet"
    assert _refusal(storage_root=root) == (
        f"Value error, INLET_STORAGE_ROOT={root} needs a service-account key, in the environment or "
        "INLET_STORAGE_OPTIONS: GOOGLE_SERVICE_ACCOUNT_KEY (the key's JSON) or GOOGLE_APPLICATION_CREDENTIALS (its file)")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    assert _refusal(storage_root=root) == (
        f"Value error, INLET_STORAGE_ROOT={root}: the service-account key file {tmp_path / 'absent.json'} cannot be "
        "read (No such file or directory)")
    monkeypatch.setenv("GOOGLE_SERVICE_ACCOUNT_KEY", '{"type": "authorized_user"}')
    assert _refusal(storage_root=root) == (
        f"Value error, INLET_STORAGE_ROOT={root}: GOOGLE_SERVICE_ACCOUNT_KEY is not a service account's JSON key "
        "(client_email, private_key)")


def test_an_unsupported_scheme_fails_at_start_up_and_local_and_s3_need_nothing_more() -> None:
    assert _refusal(storage_root="hdfs://nn/inlet") == (
        "Value error, INLET_STORAGE_ROOT: hdfs:// is not supported; give a path, s3://, abfss://, az:// or gs://")
    assert Settings(storage_root="/srv/inlet").resolved_storage_options == {}
    assert Settings(storage_root="s3://lake/inlet").resolved_storage_options == {}  # an instance role, say


@pytest.mark.parametrize("root", [ABFSS, "az://lake/inlet", "gs://lake/inlet"])
def test_tables_live_under_the_tenants_root_in_every_store(root: str) -> None:
    me, other = uuid.uuid4(), uuid.uuid4()
    own = f"{root}/tenants/{me}/bronze/orders"

    assert resolve_delta_uri(root, me, "bronze/orders") == own
    assert resolve_delta_uri(root, me, own) == own
    for outside in (f"{root}/tenants/{other}/bronze/orders", own.replace("lake", "other", 1)):
        with pytest.raises(ValidationFailed):
            resolve_delta_uri(root, me, outside)
