"""The storage options of ``INLET_STORAGE_ROOT``: read from the provider's standard environment and
``INLET_STORAGE_OPTIONS``, and checked at start-up, so a root that no process could reach stops the
process that reads the settings instead of failing every run.

Names are delta-rs's (docs/deploy.md lists them per provider): ``AWS_*`` for S3, ``AZURE_*`` for
ADLS Gen2 / Azure Blob, ``GOOGLE_*`` for GCS, in any case and with delta-rs's aliases. S3 keeps its
fallback to the process's own credentials (instance role). Azure needs an account key, a SAS token or
a service principal; GCS a service-account key. A key given as a file (``GOOGLE_APPLICATION_CREDENTIALS``)
is read here and travels as ``GOOGLE_SERVICE_ACCOUNT_KEY``: a cluster's executors do not have the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from spark_jobs.public import AZURE_SCHEMES, GCS_SCHEMES, OBJECT_STORE_SCHEMES, S3_SCHEMES, scheme_of

# Each provider's environment, as delta-rs reads it.
ENV_PREFIXES = {**dict.fromkeys(S3_SCHEMES, "AWS_"), **dict.fromkeys(AZURE_SCHEMES, "AZURE_"),
                **dict.fromkeys(GCS_SCHEMES, "GOOGLE_")}

# delta-rs's aliases (lower case) of the options the checks look at.
_AZURE = {
    "account_name": {"azure_storage_account_name", "account_name"},
    "account_key": {"azure_storage_account_key", "azure_storage_access_key", "azure_storage_master_key",
                    "account_key", "access_key", "master_key"},
    "sas": {"azure_storage_sas_key", "azure_storage_sas_token", "sas_key", "sas_token"},
    "client_id": {"azure_storage_client_id", "azure_client_id", "client_id"},
    "client_secret": {"azure_storage_client_secret", "azure_client_secret", "client_secret"},
    "tenant_id": {"azure_storage_tenant_id", "azure_storage_authority_id", "azure_tenant_id", "azure_authority_id",
                  "tenant_id", "authority_id"},
}
_GCS_KEY = {"google_service_account_key", "service_account_key"}
_GCS_KEY_FILE = {"google_service_account", "google_service_account_path", "service_account", "service_account_path",
                 "google_application_credentials"}
_SERVICE_PRINCIPAL = ("AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_TENANT_ID")


def storage_options(root: str, environ: Mapping[str, str], explicit: Mapping[str, str]) -> dict[str, str]:
    """What every process of a job needs to reach ``root``: the provider's environment with
    ``explicit`` over it; nothing for local storage. A ``ValueError`` names what is missing."""
    scheme = scheme_of(root)
    if scheme not in OBJECT_STORE_SCHEMES:
        return {}
    prefix = ENV_PREFIXES[scheme]
    options = {**{k: v for k, v in environ.items() if k.startswith(prefix) and v}, **explicit}
    if scheme in AZURE_SCHEMES:
        _check_azure(root, options)
    elif scheme in GCS_SCHEMES:
        options = _with_gcs_key(root, options)
    return options


def _given(options: Mapping[str, str], names: set[str]) -> str | None:
    return next((v for k, v in options.items() if k.lower() in names and v), None)


def _check_azure(root: str, options: Mapping[str, str]) -> None:
    where = f"INLET_STORAGE_ROOT={root}"
    authority = root.split("://", 1)[1].split("/", 1)[0]
    if scheme_of(root) == "abfss" and ("@" not in authority or not authority.split("@", 1)[1]):
        raise ValueError(f"{where}: give abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX")
    if scheme_of(root) == "az" and not _given(options, _AZURE["account_name"]):
        raise ValueError(f"{where}: az:// needs the account's name in AZURE_STORAGE_ACCOUNT_NAME")
    if _given(options, _AZURE["account_key"]) or _given(options, _AZURE["sas"]):
        return
    principal = [name for name, role in zip(_SERVICE_PRINCIPAL, ("client_id", "client_secret", "tenant_id"), strict=True)
                 if _given(options, _AZURE[role])]
    if len(principal) == len(_SERVICE_PRINCIPAL):
        return
    if principal:
        missing = ", ".join(n for n in _SERVICE_PRINCIPAL if n not in principal)
        raise ValueError(f"{where}: a service principal needs AZURE_CLIENT_ID, AZURE_CLIENT_SECRET and "
                         f"AZURE_TENANT_ID; {missing} missing")
    raise ValueError(f"{where} needs Azure credentials, in the environment or INLET_STORAGE_OPTIONS: "
                     "AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_SAS_TOKEN, or a service principal "
                     "(AZURE_CLIENT_ID, AZURE_CLIENT_SECRET, AZURE_TENANT_ID)")


def _with_gcs_key(root: str, options: dict[str, str]) -> dict[str, str]:
    where = f"INLET_STORAGE_ROOT={root}"
    key = _given(options, _GCS_KEY)
    source = "GOOGLE_SERVICE_ACCOUNT_KEY"
    if key is None:
        path = _given(options, _GCS_KEY_FILE)
        if path is None:
            raise ValueError(f"{where} needs a service-account key, in the environment or INLET_STORAGE_OPTIONS: "
                             "GOOGLE_SERVICE_ACCOUNT_KEY (the key's JSON) or GOOGLE_APPLICATION_CREDENTIALS (its file)")
        try:
            key = Path(path).read_text()
        except OSError as exc:
            raise ValueError(f"{where}: the service-account key file {path} cannot be read ({exc.strerror})") from None
        source = f"the service-account key file {path}"
        options = {**options, "GOOGLE_SERVICE_ACCOUNT_KEY": key}
    # delta-rs refuses a key and a key file together, and an executor has no such file.
    options = {k: v for k, v in options.items() if k.lower() not in _GCS_KEY_FILE}
    try:
        parsed = json.loads(key)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not all(parsed.get(f) for f in ("client_email", "private_key")):
        raise ValueError(f"{where}: {source} is not a service account's JSON key (client_email, private_key)")
    return options
