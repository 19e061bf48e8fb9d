"""Standard Webhooks (https://www.standardwebhooks.com): the signing secret and the three headers.

A secret is ``whsec_`` and the base64 of 32 random bytes; the key is those bytes. Each attempt is
signed over ``{webhook-id}.{webhook-timestamp}.{body}`` with HMAC-SHA256, and ``webhook-signature``
is ``v1,`` and the base64 of the digest; several signatures (the new and the previous secret, after
a rotation) are separated by spaces.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Sequence

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    digest = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers(secrets_: Sequence[str], message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The headers of one attempt, signed with each of ``secrets_`` (newest first)."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(sign(secret, message_id, timestamp, body) for secret in secrets_),
    }
