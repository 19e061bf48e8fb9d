"""The embedded secret backend: versioned secrets encrypted with Fernet under the data dir.

For a single machine (the demo, tests, a laptop). The key file and every secret file are 0600;
writes are atomic (rename) and serialized per path with a file lock, so several processes
(API, worker) can share it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from api.secrets.store import SecretBackendUnavailable, SecretNotFound, StoredSecret


class LocalSecretStore:
    backend = "local"

    def __init__(self, *, root: Path, key_file: Path) -> None:
        self._root = root
        self._key_file = key_file
        self._fernet: Fernet | None = None

    def _cipher(self) -> Fernet:
        if self._fernet is None:
            self._key_file.parent.mkdir(parents=True, exist_ok=True)
            if not self._key_file.exists():
                fd = os.open(self._key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(Fernet.generate_key())
            self._fernet = Fernet(self._key_file.read_bytes().strip())
        return self._fernet

    def _file(self, path: str) -> Path:
        # Hashed names: a path is caller-built, and hashing rules out any traversal through it.
        return self._root / f"{hashlib.sha256(path.encode()).hexdigest()}.secret"

    @contextmanager
    def _locked(self, path: str) -> Iterator[Path]:
        self._root.mkdir(parents=True, exist_ok=True, mode=0o700)
        target = self._file(path)
        with open(target.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield target
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _load(self, target: Path) -> dict[str, Any]:
        if not target.exists():
            return {}
        try:
            return json.loads(self._cipher().decrypt(target.read_bytes()))
        except InvalidToken as exc:
            raise SecretBackendUnavailable("The local secret store cannot decrypt its files: wrong key file") from exc

    def _save(self, target: Path, doc: dict[str, Any]) -> None:
        tmp = target.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(self._cipher().encrypt(json.dumps(doc).encode()))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)

    def write(self, path: str, data: dict[str, Any]) -> int:
        with self._locked(path) as target:
            doc = self._load(target) or {"path": path, "versions": {}}
            version = max((int(v) for v in doc["versions"]), default=0) + 1
            doc["versions"][str(version)] = data
            self._save(target, doc)
            return version

    def read(self, path: str, version: int | None = None) -> dict[str, Any]:
        with self._locked(path) as target:
            versions = self._load(target).get("versions", {})
        if not versions:
            raise SecretNotFound(path)
        chosen = str(version if version is not None else max(int(v) for v in versions))
        if chosen not in versions:
            raise SecretNotFound(path, version)
        return versions[chosen]

    def destroy(self, path: str) -> None:
        with self._locked(path) as target:
            target.unlink(missing_ok=True)
        target.with_suffix(".lock").unlink(missing_ok=True)

    def describe(self, path: str) -> StoredSecret | None:
        with self._locked(path) as target:
            versions = self._load(target).get("versions", {})
            if not versions:
                return None
            updated = datetime.fromtimestamp(target.stat().st_mtime, UTC)
        return StoredSecret(path=path, updated_at=updated, versions=frozenset(int(v) for v in versions))

    def list_paths(self, under: str) -> list[str]:
        folder = under.strip("/") + "/"
        if not self._root.exists():
            return []
        paths = []
        for file in self._root.glob("*.secret"):
            try:
                path = self._load(file).get("path", "")
            except FileNotFoundError:
                continue  # destroyed meanwhile
            if path.startswith(folder):
                paths.append(path)
        return sorted(paths)

    def health(self) -> dict[str, Any]:
        try:
            self._cipher()
        except (OSError, ValueError) as exc:
            return {"backend": self.backend, "status": "unavailable", "detail": type(exc).__name__}
        return {"backend": self.backend, "status": "ok"}
