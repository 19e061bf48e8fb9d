"""Kafka clients kept warm per connection, for the API's hot reads (``GET /pipelines/{id}/offsets``).

Building a client costs a secret-store read and a librdkafka handle that must reach the brokers
before its first answer; reusing one makes an offsets read a pair of lookups. A client is kept per
(connection, revision, credentials version): rotating the credentials or editing the connection
changes the key, and the first read that sees the new key closes the old client. Clients idle for
``idle_s`` are closed by a reaper thread whether or not another request comes, and the least
recently used beyond ``max_clients`` (or beyond ``max_per_tenant`` of one tenant's: one tenant's
connections, each a thread and two files per bootstrap server, cannot fill the process) are closed
as new ones open, so a connection deleted through another API process is not held past that. One process's deletes close theirs at
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
    tenant_id: uuid.UUID


class KafkaClientCache:
    def __init__(self, secrets: SecretStore, *, timeout_s: float, client_id: str, egress: EgressPolicy,
                 max_clients: int = 64, max_per_tenant: int = 8, idle_s: float = 300.0) -> None:
        self._secrets, self._timeout_s, self._client_id, self._egress = secrets, timeout_s, client_id, egress
        self._max_clients, self._max_per_tenant, self._idle_s = max_clients, max_per_tenant, idle_s
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._reaper: threading.Thread | None = None

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
            self._entries[key] = _Entry(built, now, conn.tenant_id)
            theirs = [k for k, e in self._entries.items() if e.tenant_id == conn.tenant_id]  # least recent first
            for old in theirs[:max(0, len(theirs) - self._max_per_tenant)]:
                self._entries.pop(old).client.close()
            while len(self._entries) > self._max_clients:
                self._entries.popitem(last=False)[1].client.close()
            self._start_reaper()
        return built

    def sweep(self) -> int:
        """Close the clients idle for ``idle_s``; how many. The reaper calls it, so an idle client goes
        whether or not another request comes."""
        now = time.monotonic()
        with self._lock:
            idle = [k for k, e in self._entries.items() if now - e.used_at > self._idle_s]
            for key in idle:
                self._entries.pop(key).client.close()
        return len(idle)

    def _start_reaper(self) -> None:
        if self._reaper is None and not self._stopped.is_set():
            interval = max(1.0, self._idle_s / 2)
            self._reaper = threading.Thread(target=self._reap, args=(interval,), daemon=True,
                                            name="inlet-kafka-client-reaper")
            self._reaper.start()

    def _reap(self, interval: float) -> None:
        while not self._stopped.wait(interval):
            self.sweep()

    def forget(self, connection_id: uuid.UUID) -> None:
        """Close the clients of a connection that is gone."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == connection_id]:
                self._entries.pop(key).client.close()

    def close(self) -> None:
        self._stopped.set()
        with self._lock:
            for entry in self._entries.values():
                entry.client.close()
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
