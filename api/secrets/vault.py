"""The Vault secret backend: one KV v2 secret per connection, under a per-tenant path.

A connection's credentials live at ``<mount>/data/<prefix>/tenants/<tenant>/connections/<id>``, so a
Vault policy can confine each tenant (or each Inlet deployment) to its own subtree; the least
policy Inlet needs is ``deploy/vault/inlet-policy.hcl``. Every write is a new KV version; the
database keeps only the path and the version, and a planned run reads the version it was planned
with even after a rotation. With ``namespace`` set (HCP Vault, Vault Enterprise, OpenBao) every
request carries it, except ``sys/health``, which Vault serves only in the root namespace.

Failures are mapped onto the store's domain errors and never carry a secret value: Vault
unreachable, timing out or sealed → ``SecretBackendUnavailable`` (503, retried); token or AppRole
login refused → ``SecretBackendRefused`` (503, an operator must act, never retried); missing path or
version → ``SecretNotFound``. With AppRole (``role_id`` + ``secret_id``) the store logs in on first
use and once more when Vault refuses the token, since an expired token looks exactly like a
refused one; a login Vault refuses (a secret id expired or used up) is a refusal, not an outage.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import hvac
import requests
from hvac import exceptions as vault_errors

from api.core.config import Settings
from api.core.errors import DomainError
from api.secrets.store import (
    CONNECTIONS_ROOT,
    SecretBackendRefused,
    SecretBackendUnavailable,
    SecretNotFound,
    StoredSecret,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

# Paths are built by Inlet (uuids), but the store refuses anything that could climb out of its
# prefix or address another mount, whoever the caller.
_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")

# sys/health answers with these codes (Vault docs, /sys/health): 200 active, 429 unsealed standby,
# 472 DR secondary, 473 performance standby, 501 not initialised, 503 sealed.
_HEALTH_SERVING = {200, 429, 472, 473}

# A connection path no tenant has: readiness asks what Inlet may do there.
_PROBE = f"{CONNECTIONS_ROOT}/readiness-probe/connections/readiness-probe"


class VaultSecretStore:
    backend = "vault"

    def __init__(
        self,
        *,
        addr: str,
        token: str | None = None,
        role_id: str | None = None,
        secret_id: str | None = None,
        mount: str = "secret",
        prefix: str = "inlet",
        namespace: str | None = None,
        timeout_s: float = 5.0,
        approle_mount: str = "approle",
    ) -> None:
        if not token and not (role_id and secret_id):
            raise ValueError("Vault needs a token (INLET_VAULT_TOKEN) or AppRole (INLET_VAULT_ROLE_ID + INLET_VAULT_SECRET_ID)")
        for name, value in (("mount", mount), ("prefix", prefix), ("approle mount", approle_mount)):
            if not all(_SEGMENT.match(part) for part in value.strip("/").split("/")):
                raise ValueError(f"vault {name} {value!r} must be slash-separated names")
        self.addr = addr.rstrip("/")
        self.mount = mount.strip("/")
        self.prefix = prefix.strip("/")
        self.namespace = namespace.strip("/") if namespace else None
        self.timeout_s = timeout_s
        self._role_id = role_id
        self._secret_id = secret_id
        self._approle_mount = approle_mount.strip("/")
        self._login_lock = threading.Lock()
        # token="" rather than None: hvac would otherwise pick up VAULT_TOKEN or ~/.vault-token,
        # and Inlet takes its credentials from its settings only.
        self._client = hvac.Client(url=self.addr, token=token or "", namespace=self.namespace, timeout=timeout_s)
        # sys/health is served only in the root namespace and needs no token.
        self._root = hvac.Client(url=self.addr, token="", timeout=timeout_s)
        self._uses_approle = bool(role_id and secret_id)
        self._logged_in = not self._uses_approle

    @classmethod
    def from_settings(cls, settings: Settings) -> VaultSecretStore:
        if not settings.vault_addr:
            raise ValueError("INLET_VAULT_ADDR is required when INLET_SECRET_BACKEND=vault")
        return cls(
            addr=settings.vault_addr,
            token=settings.vault_token.get_secret_value() if settings.vault_token else None,
            role_id=settings.vault_role_id,
            secret_id=settings.vault_secret_id.get_secret_value() if settings.vault_secret_id else None,
            mount=settings.vault_mount,
            prefix=settings.vault_prefix,
            namespace=settings.vault_namespace,
            timeout_s=settings.vault_timeout_s,
            approle_mount=settings.vault_approle_mount,
        )

    # The SecretStore protocol.

    def write(self, path: str, data: dict[str, Any]) -> int:
        full = self._full(path)
        response = self._call("write", path, lambda: self._kv.create_or_update_secret(
            path=full, secret=data, mount_point=self.mount,
        ))
        return int(response["data"]["version"])

    def read(self, path: str, version: int | None = None) -> dict[str, Any]:
        full = self._full(path)
        response = self._call("read", path, lambda: self._kv.read_secret_version(
            path=full, version=version, mount_point=self.mount, raise_on_deleted_version=True,
        ), version=version)
        data = response["data"]["data"]
        if data is None:  # a soft-deleted version answered without raising
            raise SecretNotFound(path, version)
        return dict(data)

    def destroy(self, path: str) -> None:
        full = self._full(path)
        try:
            self._call("destroy", path, lambda: self._kv.delete_metadata_and_all_versions(
                path=full, mount_point=self.mount,
            ))
        except SecretNotFound:
            pass  # already gone: destroying is idempotent

    def describe(self, path: str) -> StoredSecret | None:
        full = self._full(path)
        try:
            response = self._call("metadata read", path, lambda: self._kv.read_secret_metadata(
                path=full, mount_point=self.mount,
            ))
        except SecretNotFound:
            return None
        meta = response["data"]
        now = datetime.now(UTC)
        # A deletion_time still to come is KV's delete_version_after at work: readable until then.
        readable = frozenset(
            int(number) for number, version in (meta.get("versions") or {}).items()
            if not version.get("destroyed")
            and not (version.get("deletion_time") and _timestamp(version["deletion_time"]) <= now)
        )
        updated = meta.get("updated_time") or meta.get("created_time")
        return StoredSecret(path=path, updated_at=_timestamp(updated) if updated else now, versions=readable)

    def list_paths(self, under: str) -> list[str]:
        found: list[str] = []
        folders = [under.strip("/")]
        while folders:
            folder = folders.pop()
            full = self._full(folder)
            try:
                keys = self._call("list", folder, lambda: self._kv.list_secrets(
                    path=full, mount_point=self.mount,  # noqa: B023 (called at once, in this iteration)
                ))["data"]["keys"]
            except SecretNotFound:
                continue  # an empty folder does not exist in KV
            for key in keys:
                child = f"{folder}/{key.rstrip('/')}"
                if not _SEGMENT.match(key.rstrip("/")):
                    log.warning("Vault folder %s/%s holds a key Inlet never writes; left alone", self.prefix, folder)
                elif key.endswith("/"):
                    folders.append(child)
                else:
                    found.append(child)
        return sorted(found)

    def health(self) -> dict[str, Any]:
        """``ok``, ``sealed``, ``unavailable`` or ``refused`` (with what was refused), never raising.

        Ready means Vault is serving and Inlet's token may do on its own paths what Inlet does:
        asked of ``sys/capabilities-self`` for a probe path under the prefix, so a missing grant is
        named before the first connection needs it.
        """
        report: dict[str, Any] = {"backend": self.backend, "address": self.addr}
        if self.namespace:
            report["namespace"] = self.namespace
        try:
            response = self._root.sys.read_health_status(method="GET")
        except requests.exceptions.RequestException as exc:
            return report | {"status": "unavailable", "detail": _transport_detail(exc, self.timeout_s)}
        status_code, body = _status_and_body(response)
        if isinstance(body, dict) and body.get("version"):
            report["version"] = body["version"]
        if status_code not in _HEALTH_SERVING:
            sealed = status_code == 503 or (isinstance(body, dict) and body.get("sealed") is True)
            if sealed:
                return report | {"status": "sealed", "detail": "Vault is sealed"}
            return report | {"status": "unavailable", "detail": f"sys/health answered {status_code}"}
        try:
            missing = self._missing_capabilities()
        except SecretBackendRefused as exc:
            return report | {"status": "refused", "detail": exc.detail}
        except SecretBackendUnavailable as exc:
            return report | {"status": "unavailable", "detail": exc.detail}
        if missing is None:
            return report | {"status": "ok", "detail": (
                "Vault does not let Inlet's token list its own capabilities (grant update on "
                "sys/capabilities-self, as deploy/vault/inlet-policy.hcl does); reading was checked, writing was not")}
        if missing:
            return report | {"status": "refused", "detail": (
                f"Inlet's Vault token lacks {'; '.join(missing)} (see deploy/vault/inlet-policy.hcl)")}
        return report | {"status": "ok"}

    # Internals.

    @property
    def _kv(self) -> Any:
        return self._client.secrets.kv.v2

    def _full(self, path: str) -> str:
        parts = path.split("/")
        if not path or not all(_SEGMENT.match(part) for part in parts):
            raise ValueError("secret paths are slash-separated names (letters, digits, '.', '_', '-')")
        return f"{self.prefix}/{path}"

    def _needed(self) -> dict[str, set[str]]:
        """What Inlet does, per Vault path, checked on the probe connection's paths."""
        probe = self._full(_PROBE)
        return {
            f"{self.mount}/data/{probe}": {"create", "read", "update"},
            f"{self.mount}/metadata/{probe}": {"read", "delete"},
            f"{self.mount}/metadata/{self.prefix}/{CONNECTIONS_ROOT}/": {"list"},
        }

    def _missing_capabilities(self) -> list[str] | None:
        """``["update on secret/data/…", …]``; None when the token may not ask (then a read is tried)."""
        needed = self._needed()
        try:
            granted = self._call("capabilities check", None,
                                 lambda: self._client.sys.get_capabilities(paths=list(needed)))
        except SecretBackendRefused:
            # Either the token is bad or it may not call capabilities-self: a plain read tells which.
            try:
                self.read(_PROBE)
            except SecretNotFound:
                pass  # the read was allowed (nothing is there): the token works
            return None  # a secret at the probe path (never written by Inlet) proves reading as well
        missing: list[str] = []
        for path, wanted in needed.items():
            have = set(granted.get(path) or granted.get("data", {}).get(path) or [])
            if "root" in have:
                continue
            missing.extend(f"{capability} on {path}" for capability in sorted(wanted - have))
        return missing

    def _login(self, *, force: bool = False) -> None:
        with self._login_lock:
            if self._logged_in and not force:
                return
            self._logged_in = False
            try:
                self._client.auth.approle.login(
                    role_id=self._role_id, secret_id=self._secret_id, mount_point=self._approle_mount,
                )
            except (vault_errors.InvalidRequest, vault_errors.Forbidden, vault_errors.Unauthorized) as exc:
                raise self._login_refused(exc) from None
            except Exception as exc:  # noqa: BLE001 (mapped: unreachable, sealed, 5xx)
                raise self._mapped(exc, "AppRole login", None, None) from None
            self._logged_in = True

    def _call(self, action: str, path: str | None, fn: Callable[[], T], *, version: int | None = None) -> T:
        """Run one Vault request; log in first (AppRole) and once more if the token was refused."""
        attempts = 2 if self._uses_approle else 1
        for attempt in range(attempts):
            try:
                if self._uses_approle:
                    self._login(force=attempt > 0)
                return fn()
            except DomainError:
                raise  # already mapped (a refused or failed login)
            except vault_errors.Forbidden:
                if attempt + 1 < attempts:
                    log.info("Vault refused the AppRole token during %s; logging in again", action)
                    continue
                raise self._refused(action) from None
            except Exception as exc:  # noqa: BLE001 (mapped, or re-raised below)
                raise self._mapped(exc, action, path, version) from None
        raise AssertionError("unreachable")

    def _login_refused(self, exc: Exception) -> SecretBackendRefused:
        where = f"auth/{self._approle_mount}" + (f" in namespace {self.namespace}" if self.namespace else "")
        if isinstance(exc, vault_errors.InvalidRequest):
            why = "the role id or secret id is wrong, or the secret id has expired or been used up"
        else:
            why = f"permission denied (is AppRole enabled at {where}?)"
        log.warning("Vault at %s refused Inlet's AppRole login at %s: %s", self.addr, where, why)
        return SecretBackendRefused(
            f"Vault refused Inlet's AppRole login at {where} (INLET_VAULT_ROLE_ID / INLET_VAULT_SECRET_ID): {why}. "
            "An operator must issue a new secret id or fix the role."
        )

    def _refused(self, action: str) -> SecretBackendRefused:
        log.warning("Vault at %s refused Inlet's credentials (permission denied) during %s", self.addr, action)
        how = "AppRole token" if self._uses_approle else "token (INLET_VAULT_TOKEN)"
        return SecretBackendRefused(
            f"Vault refused Inlet's {how} for a secret {action}: permission denied. "
            "An operator must renew the token or fix the Vault policy (see deploy/vault/inlet-policy.hcl)."
        )

    def _mapped(self, exc: Exception, action: str, path: str | None, version: int | None) -> Exception:
        # Messages are built here from the status and Inlet's own path: hvac's exception texts can
        # echo a response body, which is never passed on.
        if isinstance(exc, requests.exceptions.RequestException):
            detail = _transport_detail(exc, self.timeout_s)
            log.warning("Vault at %s unavailable during %s: %s", self.addr, action, detail)
            return SecretBackendUnavailable(f"Vault at {self.addr} {detail}; retry later")
        if isinstance(exc, vault_errors.InvalidPath) and path is not None:
            return SecretNotFound(path, version)
        if isinstance(exc, vault_errors.VaultDown):
            log.warning("Vault at %s is sealed or down (503) during %s", self.addr, action)
            return SecretBackendUnavailable(f"Vault at {self.addr} is sealed or unavailable (503); retry later")
        if isinstance(exc, vault_errors.Unauthorized):
            return self._refused(action)
        if isinstance(exc, vault_errors.VaultError):
            status = _status_of(exc)
            log.warning("Vault at %s answered %s during %s", self.addr, status, action)
            return SecretBackendUnavailable(f"Vault at {self.addr} answered {status} to a {action} request")
        return exc


def _status_of(exc: vault_errors.VaultError) -> str:
    names = {
        vault_errors.InvalidRequest: "400 (invalid request)", vault_errors.RateLimitExceeded: "429 (rate limited)",
        vault_errors.InternalServerError: "500 (internal error)", vault_errors.VaultNotInitialized: "501 (not initialised)",
        vault_errors.BadGateway: "502 (bad gateway)",
    }
    return names.get(type(exc), "an unexpected status")


def _transport_detail(exc: requests.exceptions.RequestException, timeout_s: float) -> str:
    if isinstance(exc, requests.exceptions.Timeout):
        return f"did not answer within {timeout_s:g}s"
    if isinstance(exc, requests.exceptions.SSLError):
        return "failed the TLS handshake"
    if isinstance(exc, requests.exceptions.ConnectionError):
        return "is unreachable (connection failed)"
    return f"could not be asked ({type(exc).__name__})"


def _status_and_body(response: Any) -> tuple[int, Any]:
    # hvac's JSON adapter returns a dict for a 200 and the raw response otherwise.
    if isinstance(response, dict):
        return 200, response
    try:
        body = response.json()
    except ValueError:
        body = None
    return response.status_code, body


def _timestamp(value: str) -> datetime:
    """Vault's RFC 3339 times carry nanoseconds, which ``fromisoformat`` does not take."""
    trimmed = re.sub(r"(\.\d{6})\d+", r"\1", value.replace("Z", "+00:00"))
    return datetime.fromisoformat(trimmed).astimezone(UTC)
