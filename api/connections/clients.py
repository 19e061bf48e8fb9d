"""Kafka clients kept warm per connection, for the API's hot reads (``GET /pipelines/{id}/offsets``).

Building a client costs a secret-store read and a librdkafka handle that must reach the brokers
before its first answer; reusing one makes an offsets read a pair of lookups. A client is kept per
(connection, revision, credentials version): rotating the credentials or editing the connection
changes the key, and the first read that sees the new key closes the old client. Clients idle for
``idle_s`` and the least recently used beyond ``max_clients`` are closed too, so a connection
deleted through another API process is not held past that. One process's deletes close theirs at
once (``forget``).

A cached client serves concurrent requests: librdkafka handles are thread-safe, and the errors a
``KafkaClient`` collects are the cluster's (transport, authentication), the same for every caller.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from api.connections.client_configs import client_config
from api.connections.models import Connection
from api.kafka.client import KafkaClient
from api.secrets.store import SecretStore
from spark_jobs.public import EgressPolicy

_Key = tuple[uuid.UUID, int, int | None]  # (connection, revision, credentials version)


@dataclass
class _Entry:
    client: KafkaClient
    used_at: float


class KafkaClientCache:
    def __init__(self, secrets: SecretStore, *, timeout_s: float, client_id: str, egress: EgressPolicy,
                 max_clients: int = 64, idle_s: float = 300.0) -> None:
        self._secrets, self._timeout_s, self._client_id, self._egress = secrets, timeout_s, client_id, egress
        self._max_clients, self._idle_s = max_clients, idle_s
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def client(self, conn: Connection) -> KafkaClient:
        """The connection's client as it stands now (its credentials read only when it is built)."""
        key = (conn.id, conn.revision, conn.credentials_version)
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                entry.used_at = now
                self._entries.move_to_end(key)
                return entry.client
        # Built outside the lock: a secret-store read must not hold up every other connection.
        built = KafkaClient(client_config(conn, self._secrets), egress=self._egress, timeout_s=self._timeout_s,
                            client_id=self._client_id)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:  # a concurrent request built one first: keep that one
                built.close()
                entry.used_at = now
                return entry.client
            stale = [k for k, e in self._entries.items()
                     if k[0] == conn.id or now - e.used_at > self._idle_s]
            for old in stale:
                self._entries.pop(old).client.close()
            self._entries[key] = _Entry(built, now)
            while len(self._entries) > self._max_clients:
                self._entries.popitem(last=False)[1].client.close()
        return built

    def forget(self, connection_id: uuid.UUID) -> None:
        """Close the clients of a connection that is gone."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == connection_id]:
                self._entries.pop(key).client.close()

    def close(self) -> None:
        with self._lock:
            for entry in self._entries.values():
                entry.client.close()
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
