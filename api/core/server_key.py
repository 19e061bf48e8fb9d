"""The platform's own key for keyed digests: what Inlet keeps so that it can recognise a value again
without keeping anything that recomputes from the value alone (idempotency fingerprints).

``INLET_SERVER_KEY`` when set, which every API replica must be given alike; else a random key
generated on first use into ``data_dir/server.key`` (0600), which the processes of one host share.
Each use takes its own key derived from it (``derived_key``), so one purpose's digests say nothing of
another's.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from api.core.config import Settings

KEY_FILE_NAME = "server.key"


def _key_file(path: Path) -> bytes:
    """The key in ``path``, written first (whole, then linked into place) if no process has yet."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(32))
        try:
            os.link(draft, path)  # never a half-written key for a concurrent reader; the first process wins
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip().encode()


def server_key(settings: Settings) -> bytes:
    if settings.server_key is not None:
        return settings.server_key.get_secret_value().encode()
    return _key_file(settings.data_dir / KEY_FILE_NAME)


def derived_key(settings: Settings, purpose: str) -> bytes:
    """The key of one ``purpose`` (e.g. ``"idempotency-fingerprint"``)."""
    return hmac.new(server_key(settings), b"inlet/" + purpose.encode(), hashlib.sha256).digest()
