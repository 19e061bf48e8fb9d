"""A pipeline's schedule as the API takes and shows it: a cron expression, an interval, or continuous
(back to back). When a schedule fires next is ``api.pipelines.scheduling``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter
from pydantic import ConfigDict, Discriminator, Field, Tag, field_validator

from api.pipelines.as_written import AsWritten


class CronSchedule(AsWritten):
    model_config = ConfigDict(extra="forbid")

    cron: str = Field(min_length=9, max_length=200, examples=["*/5 * * * *"])
    timezone: str = Field(default="UTC", max_length=64)

    @field_validator("cron")
    @classmethod
    def _cron(cls, cron: str) -> str:
        if len(cron.split()) != 5 or not croniter.is_valid(cron):
            raise ValueError("not a 5-field cron expression (minute hour day-of-month month day-of-week)")
        try:
            croniter(cron, datetime.now(UTC)).get_next(datetime)
        except CroniterBadDateError:
            raise ValueError("the cron expression never fires (no such date)") from None
        return cron

    @field_validator("timezone")
    @classmethod
    def _zone(cls, zone: str) -> str:
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a tzdata folder, such as "America"
            raise ValueError("not an IANA timezone name such as Europe/Paris or UTC") from None
        return zone


class IntervalSchedule(AsWritten):
    model_config = ConfigDict(extra="forbid")

    interval_seconds: int = Field(ge=10, le=31 * 86_400)


class ContinuousSchedule(AsWritten):
    """The next run is planned as soon as the previous one commits (docs/runs.md, "Continuous pipelines")."""

    model_config = ConfigDict(extra="forbid")

    continuous: Literal[True] = Field(description="Run back to back: each run starts as the previous one commits")
    idle_wait_ms: int = Field(
        default=500, ge=50, le=60_000,
        description="How long to wait before looking again when the topic had nothing new (no run is recorded)")
    max_offsets_per_run: int = Field(
        default=100_000, ge=1, le=10**12,
        description="At most this many offsets per run (with source.max_offsets_per_run, the smaller), so a "
                    "backlog drains in several commits")


# Each schedule is told by the one field of its kind it holds; an error names only that schedule's fields.
_SCHEDULE_KINDS = {"cron": "CronSchedule", "interval_seconds": "IntervalSchedule", "continuous": "ContinuousSchedule"}


def _schedule_kind(value: Any) -> str | None:
    held = [tag for name, tag in _SCHEDULE_KINDS.items()
            if (name in value if isinstance(value, dict) else getattr(value, name, None) is not None)]
    return held[0] if len(held) == 1 else None


Schedule = Annotated[
    Annotated[CronSchedule, Tag("CronSchedule")] | Annotated[IntervalSchedule, Tag("IntervalSchedule")]
    | Annotated[ContinuousSchedule, Tag("ContinuousSchedule")],
    Discriminator(_schedule_kind, custom_error_type="schedule_kind",
                  custom_error_message="A schedule holds exactly one of cron, interval_seconds and continuous (in a "
                                       "merge patch, set the one it replaces to null)"),
]
