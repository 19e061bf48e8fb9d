"""A Kafka cluster that could not be used for a request, as the API answers it: 504 when the cluster
did not answer in time, 502 for anything else it or the network answered with (a gateway's codes:
Inlet stands between the caller and the cluster). The error's ``kind`` goes along."""

from __future__ import annotations

from typing import Any

from api.core.errors import DomainError
from api.kafka.errors import KafkaClientError


class KafkaProblem(DomainError):
    status, code, title = 502, "kafka-unusable", "The Kafka cluster could not be used"

    def __init__(self, detail: str, error: KafkaClientError, **extra: Any) -> None:
        super().__init__(detail, kind=error.kind, **extra)
        if error.kind == "timeout":  # by kind: a diagnosis may have found a silent cluster was a TLS refusal
            self.status = 504
