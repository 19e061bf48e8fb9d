"""Choosing the secret backend the settings name: Vault/OpenBao, or the local encrypted files."""

from __future__ import annotations

from api.core.config import Settings
from api.secrets.local import LocalSecretStore
from api.secrets.store import SecretStore
from api.secrets.vault import VaultSecretStore


def build_secret_store(settings: Settings) -> SecretStore:
    if settings.secret_backend == "vault":
        return VaultSecretStore.from_settings(settings)
    return LocalSecretStore(root=settings.data_dir / "secrets", key_file=settings.resolved_secret_key_file)
