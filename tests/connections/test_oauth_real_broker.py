"""OAUTHBEARER connections on a real broker that validates tokens from a real OIDC token server
(tests/fixtures/oidc.py): the connection test passes; a wrong secret, an unknown client and a token
for another audience are each a named problem within seconds, never a timeout and never the token
server's body; the egress policy still decides whether the token endpoint is asked at all."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.core.config import Settings
from api.main import create_app
from tests.factories import make_tenant
from tests.fixtures.database import truncate_all
from tests.fixtures.kafka_broker import RealKafka
from tests.fixtures.oidc import CLIENT_ID, WRONG_AUD_ID, WRONG_AUD_SECRET, RealIdp, TokenRequest, oauth_connection_body

pytestmark = pytest.mark.slow


def _test_both_ways(client: TestClient, tenant: Any, body: dict[str, Any]) -> list[tuple[Any, float]]:
    """The unsaved test, then the saved connection's; each answer with the seconds it took."""
    saved = client.post("/connections", json=body, headers=tenant.editor)
    assert saved.status_code == 201, saved.text
    answers = []
    for path, sent in (("/connections:test", body), (f"/connections/{saved.json()['id']}/test", None)):
        began = time.monotonic()
        answer = client.post(path, json=sent, headers=tenant.editor)
        answers.append((answer, time.monotonic() - began))
    return answers


def test_an_oauthbearer_connection_test_passes(client: TestClient, tenant: Any, oauth_kafka: RealKafka,
                                               real_idp: RealIdp, oauth_topic: Any) -> None:
    oauth_topic(partitions=2)
    asked = len(real_idp.requests())
    visible = sum(1 for name in oauth_kafka.admin().list_topics(timeout=10).topics if not name.startswith("__"))
    cluster_id = oauth_kafka.admin().list_topics(timeout=10).cluster_id

    for answer, _ in _test_both_ways(client, tenant, oauth_connection_body(oauth_kafka, real_idp)):
        assert answer.status_code == 200, answer.text
        assert answer.json() == {
            "ok": True, "cluster_id": cluster_id, "brokers": [{"id": 1, "host": "127.0.0.1", "port": oauth_kafka.ports["OAUTH"]}],
            "topics_visible": visible, "schema_registry": None}
    # Inlet asked the token server itself (once per test), never librdkafka on its own.
    assert real_idp.requests()[asked:] == [TokenRequest(CLIENT_ID, 200)] * 2


_REFUSED_BY_THE_TOKEN_SERVER = {
    "type": "https://inlet.dev/problems/oauth-invalid-client", "title": "The token endpoint refused the client credentials",
    "status": 502, "detail": "Connection test failed (invalid_client): the token endpoint refused the client credentials",
    "kind": "invalid_client"}


@pytest.mark.parametrize(("client_id", "secret"), [(CLIENT_ID, "not-the-secret"), ("no-such-client", "whatever")],
                         ids=["wrong secret", "unknown client"])
def test_credentials_the_token_server_refuses_are_invalid_client_at_once(
    client: TestClient, tenant: Any, oauth_kafka: RealKafka, real_idp: RealIdp, client_id: str, secret: str
) -> None:
    asked = len(real_idp.requests())
    body = oauth_connection_body(oauth_kafka, real_idp, client_id=client_id, client_secret=secret)

    for answer, seconds in _test_both_ways(client, tenant, body):
        assert answer.status_code == 502, answer.text
        assert answer.json() == {**_REFUSED_BY_THE_TOKEN_SERVER, "instance": answer.request.url.path}
        assert "bad client credentials" not in answer.text  # the token server's error_description
        assert seconds < 3, seconds
    assert real_idp.requests()[asked:] == [TokenRequest(client_id, 401)] * 2


def test_a_token_for_another_audience_is_refused_by_the_broker_as_kafka_auth_within_seconds(
    client: TestClient, tenant: Any, oauth_kafka: RealKafka, real_idp: RealIdp
) -> None:
    # The token server issues the token; the broker refuses it (audience kafka expected). librdkafka
    # raises nothing and only tells error_cb, so Inlet must watch error_cb, not wait out its 5 s.
    asked = len(real_idp.requests())
    body = oauth_connection_body(oauth_kafka, real_idp, client_id=WRONG_AUD_ID, client_secret=WRONG_AUD_SECRET)

    for answer, seconds in _test_both_ways(client, tenant, body):
        assert answer.status_code == 502, answer.text
        problem = answer.json()
        detail = re.sub(r" \(after \d+ms in state [A-Z_]+\)", "", problem.pop("detail"))
        assert problem == {"type": "https://inlet.dev/problems/kafka-auth", "title": "The cluster refused the credentials",
                           "status": 502, "kind": "auth", "instance": answer.request.url.path}
        # The broker's own answer (never the token server's): its status names the refused token.
        assert re.fullmatch(r'Connection test failed \(auth\): metadata request: sasl_plaintext://127\.0\.0\.1:\d+/'
                            r'bootstrap: SASL authentication error: \{"status":"invalid_token"\}', detail), detail
        assert "eyJ" not in answer.text  # no token in the answer
        assert seconds < 4, seconds  # within the slice that watches error_cb, well before kafka_timeout_s (5 s)
    assert real_idp.requests()[asked:] == [TokenRequest(WRONG_AUD_ID, 200)] * 2


@pytest.fixture
def loopback_denied(settings: Settings) -> Iterator[TestClient]:
    """The API with the default egress policy: loopback denied, names looked up."""
    app = create_app(settings.model_copy(update={"egress_allow": [], "egress_lookup_s": 2.0}))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client
    truncate_all(app.state.engine)
    app.state.engine.dispose()


def test_the_egress_policy_decides_before_the_token_server_is_asked(
    loopback_denied: TestClient, oauth_kafka: RealKafka, real_idp: RealIdp
) -> None:
    tenant = make_tenant(loopback_denied)
    asked = len(real_idp.requests())
    body = oauth_connection_body(oauth_kafka, real_idp)

    for path in ("/connections:test", "/connections"):
        refused = loopback_denied.post(path, json=body, headers=tenant.editor)
        assert refused.status_code == 422, refused.text
        assert {e["field"] for e in refused.json()["errors"]} <= {"bootstrap_servers", "credentials.token_endpoint_url"}
        assert refused.json()["type"] == "https://inlet.dev/problems/egress-denied"
    assert real_idp.requests()[asked:] == []
