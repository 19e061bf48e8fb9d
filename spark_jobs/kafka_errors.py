"""Which librdkafka errors mean the cluster refused Inlet's credentials or a permission: no retry can
cure them, and a user must act. One definition for the control plane's client (``api.kafka``) and
the job's readers and writers; it lives here because ``spark_jobs`` is the layer both may import.
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaError

AUTH_ERROR_CODES = frozenset({
    KafkaError._AUTHENTICATION,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
})

AUTH_GRACE_S = 10.0


def is_auth_error(error: KafkaError) -> bool:
    return error.code() in AUTH_ERROR_CODES


class Refusals:
    """Whether the errors a job's client reported (its ``error_cb``) end its work.

    A fatal error does at once. An auth error does not: a broker that stalled judges a
    re-authentication late, with an OAuth token that expired meanwhile, and librdkafka cures that by
    reconnecting with the token ``oauth_cb`` has since refreshed. Auth errors end the work when they go
    on for ``grace_s`` with no progress (a record read or acknowledged) since the first of them; a bad
    password so costs a run ``grace_s``, not a stall timeout.
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

    def progressed(self) -> None:
        self._auth_since = None

    def final(self) -> KafkaError | None:
        """The error that ends the client's work, if one does yet."""
        if self._fatal is not None:
            return self._fatal
        if self._auth_since is not None and time.monotonic() - self._auth_since >= self.grace_s:
            return self.last_auth
        return None
