"""Warm Kafka clients for the API's offsets reads (``api.connections.clients.KafkaClientCache``): one per
connection and credentials version, bounded (in all and per tenant), closed when the connection changes or
goes, or once idle, whether or not another request comes."""

from __future__ import annotations

import time
import uuid

import pytest

from api.connections.clients import KafkaClientCache
from api.connections.models import Connection
from api.kafka.client import KafkaClient
from tests.factories import LOOPBACK_ALLOWED, create_sandbox_pipeline, make_tenant, plaintext_connection_body


def _conn(revision: int = 1, conn_id: uuid.UUID | None = None, tenant_id: uuid.UUID | None = None) -> Connection:
    return Connection(id=conn_id or uuid.uuid4(), tenant_id=tenant_id or uuid.uuid4(), name="c",
                      bootstrap_servers="127.0.0.1:1",
                      security_protocol="PLAINTEXT", options={}, revision=revision)


def _opened(cache: KafkaClientCache, conn: Connection) -> KafkaClient:
    client = cache.client(conn)
    client._handle()  # a librdkafka handle, as the first lookup would open
    return client


def test_a_connection_gets_one_client_until_it_changes_and_then_the_old_one_is_closed() -> None:
    cache = KafkaClientCache(secrets=None, timeout_s=1, client_id="t", egress=LOOPBACK_ALLOWED)  # type: ignore[arg-type]  # plaintext: no secret read
    conn = _conn()
    first = _opened(cache, conn)
    assert cache.client(conn) is first

    edited = _conn(revision=2, conn_id=conn.id)
    second = _opened(cache, edited)

    assert second is not first and first._admin is None and len(cache) == 1
    cache.forget(conn.id)
    assert second._admin is None and len(cache) == 0


@pytest.mark.parametrize("bound", ["max_clients", "idle_s"])
def test_the_cache_is_bounded_by_count_and_by_idle_time(bound: str) -> None:
    limits = {"max_clients": 2} if bound == "max_clients" else {"idle_s": 0.0}
    cache = KafkaClientCache(secrets=None, timeout_s=1, client_id="t", egress=LOOPBACK_ALLOWED, **limits)  # type: ignore[arg-type]
    oldest = _opened(cache, _conn())
    others = [_opened(cache, _conn()) for _ in range(2)]

    assert oldest._admin is None, "the least recently used (or idle) client stays open"
    assert others[-1]._admin is not None and len(cache) == (2 if bound == "max_clients" else 1)


def test_one_tenants_clients_are_bounded_apart_from_the_others() -> None:
    cache = KafkaClientCache(secrets=None, timeout_s=1, client_id="t", egress=LOOPBACK_ALLOWED,  # type: ignore[arg-type]
                             max_per_tenant=2)
    noisy, quiet = uuid.uuid4(), uuid.uuid4()
    kept = _opened(cache, _conn(tenant_id=quiet))
    noisy_ones = [_opened(cache, _conn(tenant_id=noisy)) for _ in range(5)]

    assert [c._admin is None for c in noisy_ones] == [True, True, True, False, False]
    assert kept._admin is not None and len(cache) == 3  # the other tenant's client stays


def test_an_idle_client_is_closed_without_another_request() -> None:
    cache = KafkaClientCache(secrets=None, timeout_s=1, client_id="t", egress=LOOPBACK_ALLOWED,  # type: ignore[arg-type]
                             idle_s=0.5)
    idle = _opened(cache, _conn())
    deadline = time.monotonic() + 5
    while idle._admin is not None and time.monotonic() < deadline:  # the reaper's round: every second at most
        time.sleep(0.1)
    assert idle._admin is None and len(cache) == 0
    cache.close()


@pytest.mark.db
def test_offsets_reads_reuse_the_client_and_an_edited_or_deleted_connection_closes_it(client, sandbox_kafka,
                                                                                        kafka_topic) -> None:
    tenant = make_tenant(client)
    pipeline = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [kafka_topic(partitions=2)])
    cache: KafkaClientCache = client.app.state.kafka_clients
    for _ in range(3):
        assert client.get(f"/pipelines/{pipeline['id']}/offsets", headers=tenant.viewer).json()["cluster"]["status"] == "ok"
    assert len(cache) == 1
    (warm,) = [entry.client for entry in cache._entries.values()]

    conn_id = pipeline["source"]["connection_id"]
    body = plaintext_connection_body(sandbox_kafka.bootstrap_servers, options={"client.id": "edited"})
    assert client.put(f"/connections/{conn_id}", json=body, headers=tenant.editor).status_code == 200
    assert client.get(f"/pipelines/{pipeline['id']}/offsets", headers=tenant.viewer).json()["cluster"]["status"] == "ok"
    assert warm._admin is None and len(cache) == 1 and next(iter(cache._entries.values())).client is not warm

    assert client.delete(f"/pipelines/{pipeline['id']}", headers=tenant.editor).status_code == 204
    assert client.delete(f"/connections/{conn_id}", headers=tenant.editor).status_code == 204
    assert len(cache) == 0
