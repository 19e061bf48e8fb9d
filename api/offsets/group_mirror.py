"""Mirroring a pipeline's committed offsets to a Kafka consumer group (``source.commit_to_group``).

Inlet's own offsets (``partition_offsets``) stay the source of truth; the group is a copy made so
that Kafka's own tools (``kafka-consumer-groups.sh --describe``, Burrow, kafka-ui) show the lag.
After every commit (a run's, a replay's or a reset's) a Celery task copies the *current* committed
offsets with the admin API, never as a group member, so copies are idempotent and their order does
not matter. A failed copy never fails what triggered it: the outcome is recorded on the pipeline
(``status.consumer_group``) and the task retries with backoff. Deleting the pipeline deletes the group.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from sqlmodel import Session

from api.connections.client_configs import kafka_client
from api.connections.service import ConnectionGone
from api.core.db import utcnow
from api.core.errors import DomainError
from api.kafka.errors import KafkaClientError
from api.ledger import service as ledger
from api.pipelines.definition import definition_of
from api.pipelines.models import Pipeline
from api.pipelines.service import record_group_mirror
from api.secrets.store import SecretStore
from spark_jobs.public import EgressPolicy

log = logging.getLogger(__name__)


def mirror_committed_offsets(
    *, session: Session, secrets: SecretStore, pipeline_id: uuid.UUID, timeout_s: float, egress: EgressPolicy
) -> str:
    """Copy the committed offsets to the pipeline's group: ``ok``, ``failed`` or ``off`` (no group)."""
    pipeline = session.get(Pipeline, pipeline_id)
    group = definition_of(pipeline).source.commit_to_group if pipeline else None
    if pipeline is None or not group:
        return "off"
    offsets = ledger.committed(session, pipeline.id)
    previous: dict[str, Any] = pipeline.group_mirror or {}
    outcome: dict[str, Any] = {"group": group, "partitions": len(offsets), "at": utcnow().isoformat()}
    try:
        with kafka_client(session, pipeline.connection_id, secrets, timeout_s=timeout_s, egress=egress,
                          client_id="inlet-group-mirror") as client:
            client.commit_group_offsets(group, offsets)
    except (KafkaClientError, DomainError) as exc:
        message = exc.message if isinstance(exc, KafkaClientError) else exc.detail
        attempts = (previous.get("attempts", 0) if previous.get("state") == "failed" else 0) + 1
        outcome |= {"state": "failed", "error": message, "attempts": attempts}
        log.warning("offsets of pipeline %s not mirrored to consumer group %s (attempt %d): %s",
                    pipeline.id, group, attempts, message)
    else:
        outcome |= {"state": "ok", "error": None, "attempts": 0}
    record_group_mirror(session, pipeline, outcome)
    return str(outcome["state"])


def delete_mirrored_group(
    *, session: Session, secrets: SecretStore, connection_id: uuid.UUID, group: str, timeout_s: float,
    egress: EgressPolicy,
) -> bool:
    """Delete a deleted pipeline's group; True when done (or already gone), False to retry."""
    try:
        client = kafka_client(session, connection_id, secrets, timeout_s=timeout_s, egress=egress,
                              client_id="inlet-group-mirror")
    except ConnectionGone:
        log.warning("consumer group %s not deleted: connection %s is gone", group, connection_id)
        return True
    except DomainError as exc:
        log.warning("consumer group %s not deleted: %s", group, exc.detail)
        return False
    try:
        with client:
            client.delete_group(group)
    except KafkaClientError as exc:
        log.warning("consumer group %s not deleted: %s", group, exc.message)
        return False
    log.info("consumer group %s deleted with its pipeline", group)
    return True
