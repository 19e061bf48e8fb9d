"""Typed errors of Inlet's Kafka client.

Every error carries a ``kind`` the API and the UI can act on (``dns``, ``refused``, ``tls``, ``auth``,
``timeout``, ``not_found``, ``unresolvable``, ``config``, ``unknown``) and a message built so that it
never holds a credential: librdkafka's texts name hosts and ports, and the client scrubs any
configured secret out of them anyway.
"""

from __future__ import annotations


class KafkaClientError(Exception):
    """Base of every error raised by ``api.kafka``."""

    kind: str = "unknown"

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if kind is not None:
            self.kind = kind


class KafkaConfigError(KafkaClientError, ValueError):
    """The connection's settings cannot make a valid client configuration; ``field``: the setting at
    fault, named as the connections API names it."""

    kind = "config"

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class KafkaUnavailable(KafkaClientError):
    """No broker could be reached: ``kind`` is ``dns``, ``refused``, ``tls`` or ``unknown``."""


class KafkaAuthError(KafkaClientError):
    """The cluster refused the credentials, or the principal lacks a permission."""

    kind = "auth"


class KafkaTimeout(KafkaClientError):
    """The cluster did not answer within the lookup's time bound."""

    kind = "timeout"


class KafkaLookupError(KafkaClientError):
    """The cluster answered, but not with what the lookup needs."""


class TopicNotFound(KafkaLookupError):
    """Topics (``name``) or partitions (``name[p]``) the cluster does not show."""

    kind = "not_found"

    def __init__(self, names: list[str]) -> None:
        self.names = sorted(names)
        super().__init__(f"not found or not visible to this principal: {', '.join(self.names)}")


class TimestampNotResolvable(KafkaLookupError):
    """The broker gave no offset for a timestamp.

    Kafka answers -1 when no record has a timestamp at or after the one asked (the time is past the
    partition's end), and brokers (or stand-ins) without timestamp indexes cannot serve the lookup
    at all. Either way there is no offset to use, and guessing one would move data silently.
    """

    kind = "unresolvable"

    def __init__(self, timestamp_ms: int, partitions: list[tuple[str, int]], reason: str) -> None:
        self.timestamp_ms = timestamp_ms
        self.partitions = sorted(partitions)
        shown = ", ".join(f"{t}[{p}]" for t, p in self.partitions[:10])
        more = f" and {len(self.partitions) - 10} more" if len(self.partitions) > 10 else ""
        super().__init__(f"no offset for timestamp {timestamp_ms} on {shown}{more}: {reason}")


class KafkaEgressDenied(KafkaClientError):
    """The egress policy (``spark_jobs.egress``) refuses an address the client would connect to:
    ``kind`` is ``bootstrap_denied`` (a bootstrap server), ``broker_denied`` (a broker the cluster
    advertises) or ``token_endpoint_refused`` (the OAuth token endpoint)."""


class KafkaTokenError(KafkaClientError):
    """No OAuth token from the connection's token endpoint; ``kind`` is ``spark_jobs.oauth``'s
    (``invalid_client``, ``unauthorized``, ``token_endpoint_unreachable``, ...), ``status`` the
    endpoint's answer if it gave one. Its body is never part of the message."""

    def __init__(self, message: str, *, kind: str, status: int | None = None) -> None:
        super().__init__(message, kind=kind)
        self.status = status
