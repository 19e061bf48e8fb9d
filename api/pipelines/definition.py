"""A pipeline's definition as the rest of Inlet reads it: typed, frozen, with every default applied.

The pipelines table keeps the definition as its author wrote it (``Pipeline.*_as_written``), so that
it reads back the same: that document serves round trips only (the ETag, Terraform, the portal's edit
forms; ``as_written``). Everything that acts on a pipeline (planning, the ledger, a run's execution
and job spec, the offsets API, the consumer-group mirror, the portal's pages) reads
``definition_of(pipeline)``: the schemas' own models (``api.pipelines.schemas``), where each default
is written once. (Airflow's API ADR: a derivation lives in one place.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter

from api.pipelines.contract import NO_CONTRACT, PipelineContract
from api.pipelines.maintenance_policy import MaintenancePolicy
from api.pipelines.models import Pipeline
from api.pipelines.schedules import ContinuousSchedule, CronSchedule, IntervalSchedule, Schedule
from api.pipelines.schemas import (
    DeltaTarget,
    KafkaSource,
    KafkaTarget,
    PipelineSpec,
    Target,
)

_TARGET: TypeAdapter[DeltaTarget | KafkaTarget] = TypeAdapter(Target)


@dataclass(frozen=True)
class Definition:
    """What a pipeline reads, where it writes, when it runs on its own (None: only when asked), and
    what its rows must be."""

    source: KafkaSource
    target: DeltaTarget | KafkaTarget
    schedule: Schedule | None
    contract: PipelineContract = NO_CONTRACT

    @property
    def maintenance(self) -> MaintenancePolicy | None:
        """The Delta table's maintenance policy in effect (a continuous pipeline's takes its own defaults);
        None for a Kafka target."""
        return maintenance_in_effect(self.target, self.schedule)


def maintenance_in_effect(target: DeltaTarget | KafkaTarget, schedule: Schedule | None) -> MaintenancePolicy | None:
    if not isinstance(target, DeltaTarget):
        return None
    continuous = isinstance(schedule, ContinuousSchedule)
    return target.maintenance.for_continuous() if continuous else target.maintenance


def spec_of(pipeline: Pipeline) -> PipelineSpec:
    """The pipeline as its writable shape: what a PUT of it would send."""
    return PipelineSpec.model_validate({"name": pipeline.name, "state": pipeline.state, **as_written(pipeline)})


def definition_of(pipeline: Pipeline) -> Definition:
    return Definition(source=KafkaSource.model_validate(pipeline.source_as_written),
                      target=_TARGET.validate_python(pipeline.target_as_written),
                      schedule=schedule_of(pipeline.schedule_as_written),
                      contract=PipelineContract.model_validate(pipeline.contract_as_written or {}))


def schedule_of(written: Mapping[str, Any] | None) -> Schedule | None:
    """A stored schedule typed without validating it again (it was when written, and its cron check
    costs what a hot read should not pay); fields left out take the schema's defaults."""
    if not written:
        return None
    if "interval_seconds" in written:
        return IntervalSchedule.model_construct(**written)
    if "continuous" in written:
        return ContinuousSchedule.model_construct(**written)
    return CronSchedule.model_construct(**written)


def as_written(pipeline: Pipeline) -> dict[str, Any]:
    """``{source, target, schedule, contract}`` exactly as stored (no contract: none): only for what must
    round-trip it."""
    written = {"source": pipeline.source_as_written, "target": pipeline.target_as_written,
               "schedule": pipeline.schedule_as_written}
    return written if pipeline.contract_as_written is None else {**written, "contract": pipeline.contract_as_written}
