"""Which librdkafka errors mean the cluster refused Inlet's credentials or a permission: no retry can
cure them, and a user must act. One definition for the control plane's client (``api.kafka``) and
the job's readers and writers; it lives here because ``spark_jobs`` is the layer both may import.
"""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import KafkaError

AUTH_ERROR_CODES = frozenset({
    KafkaError._AUTHENTICATION,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
})

AUTH_GRACE_S = 10.0
STATS_INTERVAL_MS = 1000
WAITING_S = 2.0
# librdkafka's states of a connection being set up, each waiting for the broker's answer.
_SETTING_UP = frozenset({"CONNECT", "SSL_HANDSHAKE", "APIVERSION_QUERY", "AUTH_HANDSHAKE", "AUTH_REQ", "AUTH_LEGACY", "REAUTH"})


def is_auth_error(error: KafkaError) -> bool:
    return error.code() in AUTH_ERROR_CODES


class Refusals:
    """Whether the errors a job's client reported (its ``error_cb``) end its work.

    A fatal error does at once. An auth error does not: a broker that stalled judges a
    re-authentication late, with an OAuth token that expired meanwhile, and librdkafka cures that by
    reconnecting with the token ``oauth_cb`` has since refreshed. Auth errors end the work when they go
    on for ``grace_s`` while the cluster answers, with no progress since the first of them; a bad
    password so costs a run ``grace_s``, not a stall timeout. From the client's statistics
    (``on_stats``, each second):

    - progress is a record read or acknowledged, or a broker connection ``UP``: the cluster takes the
      credentials on it (one that came up before the error counts too: a revoked credential so ends
      the work only once no connection is left up, at the latest after the broker's
      ``connections.max.reauth.ms``);
    - the cluster does not answer while a connection has waited ``WAITING_S`` or more for the broker in
      its set-up (connecting, authenticating): the grace starts again, for no refusal can be judged
      then. Without this, a stale token refused just before an outage would end the work, while the
      client only waited to reconnect with a fresh one.
    """

    def __init__(self, grace_s: float = AUTH_GRACE_S) -> None:
        self.grace_s = grace_s
        self.last_auth: KafkaError | None = None  # the latest auth error, progress or not since
        self._fatal: KafkaError | None = None
        self._auth_since: float | None = None

    def on_error(self, error: KafkaError) -> None:
        """librdkafka's ``error_cb``: called on the thread that polls the client."""
        if error.fatal():
            self._fatal = self._fatal or error
        elif is_auth_error(error):
            self.last_auth = error
            if self._auth_since is None:
                self._auth_since = time.monotonic()

    def client_config(self) -> dict[str, Any]:
        """The callbacks a client reports to these Refusals with: its errors, and each second its
        brokers' states (``on_stats``)."""
        return {"error_cb": self.on_error, "stats_cb": self.on_stats, "statistics.interval.ms": STATS_INTERVAL_MS}

    def on_stats(self, stats: str) -> None:
        """librdkafka's ``stats_cb``, on the thread that polls the client, after every error reported
        before it (see the class on what the brokers' states there tell)."""
        if self._auth_since is None:
            return
        brokers = json.loads(stats).get("brokers", {}).values()
        if any(broker.get("state") == "UP" for broker in brokers):
            self.progressed()
        elif any(broker.get("state") in _SETTING_UP and broker.get("stateage", 0) >= WAITING_S * 1e6 for broker in brokers):
            self._auth_since = time.monotonic()

    def progressed(self) -> None:
        self._auth_since = None

    def final(self) -> KafkaError | None:
        """The error that ends the client's work, if one does yet."""
        if self._fatal is not None:
            return self._fatal
        if self._auth_since is not None and time.monotonic() - self._auth_since >= self.grace_s:
            return self.last_auth
        return None
