"""``spark_jobs.oauth`` against a real OIDC token server (tests/fixtures/oidc.py): when a token is
taken to expire, when it is replaced, what librdkafka's ``oauth_cb`` is handed, and the SASL
extensions a provider needs (KIP-342)."""

from __future__ import annotations

import base64
import json
import time

import httpx
import pytest

from spark_jobs.oauth import TokenSource, parse_extensions, with_token_source
from tests.factories import LOOPBACK_ALLOWED
from tests.fixtures.oidc import CLIENT_ID, CLIENT_SECRET, TOKEN_TTL_S, RealIdp, TokenRequest


def _claims(token: str) -> dict[str, object]:
    payload = token.split(".")[1]
    claims: dict[str, object] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return claims


def _source(idp: RealIdp, **extra: object) -> TokenSource:
    return TokenSource(client_id=CLIENT_ID, client_secret=CLIENT_SECRET, token_endpoint_url=idp.token_url,
                       egress=LOOPBACK_ALLOWED, **extra)  # type: ignore[arg-type]


def test_a_token_expires_at_its_jwt_exp_when_expires_in_promises_longer(real_idp: RealIdp) -> None:
    # This server answers expires_in 3600 whatever the token's exp says (a proxy or a misconfigured
    # IdP can too); the broker refuses the JWT at its exp, so that is when Inlet must have replaced it.
    raw = httpx.post(real_idp.token_url, data={"grant_type": "client_credentials"}, auth=(CLIENT_ID, CLIENT_SECRET)).json()
    assert (raw["expires_in"], _claims(raw["access_token"])["exp"] - _claims(raw["access_token"])["iat"]) == (  # type: ignore[operator]
        3600, TOKEN_TTL_S)

    token = _source(real_idp).token()

    claims = _claims(token.value)
    assert (token.expires_at, token.principal, claims["sub"], claims["aud"]) == (claims["exp"], CLIENT_ID, CLIENT_ID, "kafka")
    assert 0 < token.expires_at - token.fetched_at <= TOKEN_TTL_S


def test_a_short_token_is_reused_until_its_last_fifth_then_replaced(real_idp: RealIdp) -> None:
    source = _source(real_idp, extensions={"logicalCluster": "lkc-8x2q1", "identityPoolId": "pool-Ab3d"})
    asked = len(real_idp.requests())

    first = source("")  # librdkafka's oauth_cb: (token, expiry, principal, extensions)
    again = source("")
    assert again == first
    assert (first[2], first[3]) == (CLIENT_ID, {"logicalCluster": "lkc-8x2q1", "identityPoolId": "pool-Ab3d"})
    assert real_idp.requests()[asked:] == [TokenRequest(CLIENT_ID, 200)]

    # Into the token's last fifth (its life counts from when it was fetched, up to the JWT's whole-second
    # exp: a little under TOKEN_TTL_S), yet before it expires.
    time.sleep(max(0.0, first[1] - 0.5 - time.time()))
    replaced = source("")
    assert replaced[0] != first[0] and replaced[1] > first[1]
    assert real_idp.requests()[asked:] == [TokenRequest(CLIENT_ID, 200)] * 2


def test_with_token_source_passes_the_connections_extensions_to_oauth_cb(real_idp: RealIdp) -> None:
    config = {"bootstrap.servers": "127.0.0.1:9092", "sasl.oauthbearer.method": "oidc",
              "sasl.oauthbearer.client.id": CLIENT_ID, "sasl.oauthbearer.client.secret": CLIENT_SECRET,
              "sasl.oauthbearer.token.endpoint.url": real_idp.token_url,
              "sasl.oauthbearer.extensions": "logicalCluster=lkc-8x2q1, identityPoolId=pool-Ab3d"}

    made = with_token_source(config, LOOPBACK_ALLOWED)

    assert sorted(made) == ["bootstrap.servers", "oauth_cb"]
    assert made["oauth_cb"]("")[3] == {"logicalCluster": "lkc-8x2q1", "identityPoolId": "pool-Ab3d"}


@pytest.mark.parametrize(("text", "message"), [
    ("logicalCluster", "SASL extension 1 is not key=value with a key of letters only (A-Z, a-z)"),
    ("a=1,logical_cluster=lkc-1", "SASL extension 2 is not key=value with a key of letters only (A-Z, a-z)"),
    ("auth=Bearer x", "SASL extension 1: the key auth is reserved for the token itself"),
    ("logicalCluster= ", "SASL extension 1 (logicalCluster): the value must be printable ASCII, not empty"),
    ("logicalCluster=lkc-\x01", "SASL extension 1 (logicalCluster): the value must be printable ASCII, not empty"),
    ("logicalCluster=lkc-\u00e9", "SASL extension 1 (logicalCluster): the value must be printable ASCII, not empty"),
    ("a=1,a=2", "SASL extension 2: the key a is given twice"),
])
def test_extensions_are_checked_as_kip_342_has_them(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_extensions(text)
    assert str(caught.value) == message


def test_extensions_keep_what_a_value_may_hold() -> None:
    assert parse_extensions("logicalCluster=lkc-8x2q1,identityPoolId=pool-Ab3d, note=a b=c") == {
        "logicalCluster": "lkc-8x2q1", "identityPoolId": "pool-Ab3d", "note": "a b=c"}
