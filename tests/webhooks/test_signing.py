"""Inlet's signing against the Standard Webhooks specification's published example, and the secret's
format: any Standard Webhooks library can verify what Inlet sends."""

from __future__ import annotations

import base64

from api.webhooks import signing

# The specification's example (the same in its reference libraries' tests).
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY = "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_a_signature_is_the_specifications() -> None:
    assert signing.sign(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY) == SPEC_SIGNATURE


def test_the_headers_carry_one_signature_per_secret_newest_first() -> None:
    other = signing.new_secret()
    headers = signing.headers([other, SPEC_SECRET], SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY)
    assert headers == {"webhook-id": SPEC_ID, "webhook-timestamp": str(SPEC_TIMESTAMP),
                       "webhook-signature": f"{signing.sign(other, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY)} {SPEC_SIGNATURE}"}


def test_a_secret_is_whsec_and_32_random_bytes() -> None:
    made = {signing.new_secret() for _ in range(50)}
    assert len(made) == 50
    for secret in made:
        assert secret.startswith("whsec_") and len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32
