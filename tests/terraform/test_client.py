"""The provider's HTTP client against a running Inlet: a create whose answer is lost is retried with
the same Idempotency-Key and makes one object; failures carry Inlet's problem detail."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from terraform_provider_inlet.client import ApiError, InletClient
from tests.factories import Tenant, connection_body


class LoseFirstAnswer(httpx.BaseTransport):
    """Sends every request to Inlet, but drops the answer to the first POST as a broken connection
    would: Inlet has done the work, the client does not know it."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.posts: list[dict[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "POST":
            self.posts.append(dict(request.headers))
            if len(self.posts) == 1:
                response.read()
                raise httpx.ReadError("connection reset by peer", request=request)
        return response


def test_a_create_whose_answer_is_lost_makes_one_object(inlet_url: str, client: TestClient, tenant: Tenant) -> None:
    transport = LoseFirstAnswer()
    inlet = InletClient(inlet_url, tenant.keys["editor"], transport=transport)
    created = inlet.create("/connections", connection_body(name="once"))
    assert created.body["name"] == "once" and created.etag
    assert len(transport.posts) == 2
    assert transport.posts[0]["idempotency-key"] == transport.posts[1]["idempotency-key"]
    listed = client.get("/connections", headers=tenant.viewer).json()
    assert [c["id"] for c in listed["items"]] == [created.body["id"]]


@pytest.mark.parametrize(("call", "status", "words"), [
    (lambda c: c.create("/pipelines", {"name": "x"}), 422, "source"),
    (lambda c: c.put("/connections/00000000-0000-0000-0000-000000000000", connection_body(), etag=None), 404, "not"),
])
def test_failures_carry_the_problem_detail(inlet_url: str, tenant: Tenant, call: Any, status: int, words: str) -> None:
    with pytest.raises(ApiError) as failed:
        call(InletClient(inlet_url, tenant.keys["editor"]))
    assert failed.value.status == status
    assert words in failed.value.detail.lower()


def test_a_stale_etag_is_refused_with_what_to_do(inlet_url: str, client: TestClient, tenant: Tenant) -> None:
    inlet = InletClient(inlet_url, tenant.keys["editor"])
    created = inlet.create("/connections", connection_body(name="stale"))
    body = {k: created.body[k] for k in ("name", "bootstrap_servers", "security_protocol", "sasl_mechanism")}
    inlet.put(f"/connections/{created.body['id']}", body | {"bootstrap_servers": "b:9093"}, etag=created.etag)
    with pytest.raises(ApiError) as failed:
        inlet.put(f"/connections/{created.body['id']}", body, etag=created.etag)
    assert failed.value.status == 412
    assert "run `terraform plan` again" in failed.value.detail
