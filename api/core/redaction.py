"""What a secret looks like where it is kept or shown though it must not be read: masked.

``SECRET_FIELDS`` names every write-only credential a request body can carry (a Kafka connection's
SASL password, OAuth client secret, TLS key and its password; a schema registry's password or bearer
token), wherever it sits in the body. ``masked_url`` shows a URL without what may authenticate its
caller: the user information, every query value and the fragment.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

MASK = "****"

# tests/hostile/test_fingerprints.py checks that every SecretStr field of every request body is named here.
SECRET_FIELDS = frozenset({"password", "client_secret", "key_pem", "key_password", "token"})


def without_secrets(value: Any, fields: frozenset[str] = SECRET_FIELDS) -> Any:
    """A JSON value with the value of every field named in ``fields`` replaced, at any depth."""
    if isinstance(value, dict):
        return {k: "*" if k in fields else without_secrets(v, fields) for k, v in value.items()}
    if isinstance(value, list):
        return [without_secrets(v, fields) for v in value]
    return value


def _masked_query(query: str) -> str:
    # Parameter names stay (they say what the receiver expects); every value goes, and a bare word
    # (``?s3cr3t``) is taken for a value.
    parts = []
    for part in query.split("&"):
        name, sep, _ = part.partition("=")
        parts.append(f"{name}={MASK}" if sep else MASK if part else part)
    return "&".join(parts)


def masked_url(url: str) -> str:
    """``url`` with its user information, query values and fragment masked, e.g.
    ``https://****@hooks.example.com/x?token=****``; the scheme, host, port and path are kept."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = _masked_query(parts.query) if parts.query else ""
    fragment = MASK if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))
