"""Guessing keys is throttled (``api.core.auth_throttle``): past the failed-authentication budget of its
address, an attempt is a 429 with Retry-After before any key is looked up, for tenant keys, the
operator token and the portal's sign-in alike; a key that authenticated lately keeps working from that
address; the budget frees itself as failures leave the minute. And the operator token has a minimum
strength: a short one stops the API at start-up."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from api.core.auth_throttle import AuthThrottle
from api.core.config import Settings
from api.core.errors import Unauthorized
from api.main import create_app
from tests.factories import assert_problem

BUDGET = 5


@pytest.fixture
def throttled(settings: Settings) -> TestClient:
    return TestClient(create_app(settings.model_copy(update={"auth_failures_per_minute": BUDGET})))


def test_guessing_keys_is_a_429_past_the_budget_while_a_known_key_keeps_working(throttled: TestClient,
                                                                                settings: Settings) -> None:
    operator = {"Authorization": f"Bearer {settings.admin_token.get_secret_value()}"}  # type: ignore[union-attr]
    tenant = throttled.post("/tenants", json={"name": "acme"}, headers=operator).json()
    key = throttled.post(f"/tenants/{tenant['id']}/api-keys", json={"name": "ci", "role": "viewer"},
                         headers=operator).json()["key"]
    assert throttled.get("/me", headers={"Authorization": f"Bearer {key}"}).status_code == 200

    for n in range(BUDGET):
        assert_problem(throttled.get("/me", headers={"Authorization": f"Bearer inlet_guess{n}"}), 401)
    refused = throttled.get("/me", headers={"Authorization": "Bearer inlet_guess-next"})
    problem = assert_problem(refused, 429)
    assert problem["type"].endswith("/too-many-failed-authentications")
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert_problem(throttled.get("/tenants", headers={"Authorization": "Bearer wrong-operator"}), 429)
    # The key that authenticated before still does; the operator's token too.
    assert throttled.get("/me", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    assert throttled.get("/tenants", headers=operator).status_code == 200


def test_the_portal_sign_in_is_throttled_too(throttled: TestClient) -> None:
    for _ in range(BUDGET + 1):
        page = throttled.get("/portal/login")
        csrf = page.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
        answer = throttled.post("/portal/login", data={"csrf_token": csrf, "api_key": "inlet_wrong", "next": "/portal"},
                                follow_redirects=False)
    assert answer.status_code == 429 and "Too many failed authentications" in answer.text


def test_the_budget_frees_itself_as_failures_leave_the_minute() -> None:
    now = [1000.0]
    throttle = AuthThrottle(2, clock=lambda: now[0])

    def wrong() -> None:
        raise Unauthorized("The API key is unknown or revoked")

    for _ in range(2):
        with pytest.raises(Unauthorized):
            throttle.guard("192.0.2.1", "inlet_x", wrong)
    with pytest.raises(Exception) as refused:
        throttle.guard("192.0.2.1", "inlet_y", wrong)
    assert type(refused.value).__name__ == "TooManyFailures" and refused.value.headers == {"Retry-After": "60"}
    with pytest.raises(Unauthorized):  # another address has its own budget
        throttle.guard("192.0.2.2", "inlet_x", wrong)
    now[0] += 60.5
    assert throttle.guard("192.0.2.1", "inlet_ok", lambda: "ok") == "ok"


@pytest.mark.parametrize("token", ["change-me", "a" * 31])
def test_an_operator_token_under_32_characters_stops_the_api_at_start_up(settings: Settings, token: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(**{**settings.model_dump(exclude={"admin_token"}), "admin_token": token})
    assert "INLET_ADMIN_TOKEN must be 32 characters or more" in str(refused.value)
    assert token not in str(refused.value)  # a secret, even a weak one, is not repeated
