"""What the portal's templates need beyond the services' own objects: times, ages and durations in
words, a schedule's next firings, what differs between a saved object and a form, and a form's
validation messages by input. (Charts: ``charts.py``.)"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from api.core.db import utcnow
from api.pipelines.schedules import ContinuousSchedule, CronSchedule, Schedule
from api.pipelines.scheduling import next_fire

NEXT_FIRES_SHOWN = 5

STATE_SYMBOLS = {
    "active": "▶", "paused": "‖", "queued": "…", "running": "↻", "succeeded": "✓", "failed": "✗",
    "cancelled": "⊘", "skipped": "↷",
}


def age(moment: datetime | None, now: datetime | None = None) -> str:
    """``moment`` relative to now in words: "3 min ago", "in 2 h"."""
    if moment is None:
        return "—"
    seconds = ((now or utcnow()) - moment).total_seconds()
    future, seconds = seconds < 0, abs(seconds)
    if seconds < 60:
        text = f"{int(seconds)} s"
    elif seconds < 3600:
        text = f"{int(seconds // 60)} min"
    elif seconds < 86400:
        text = f"{int(seconds // 3600)} h"
    else:
        text = f"{int(seconds // 86400)} d"
    return f"in {text}" if future else f"{text} ago"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s"


def number(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def utc(moment: datetime | None) -> str:
    """``moment`` to the second, in UTC: "2024-05-14 13:05:00 UTC"."""
    return "—" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# How offsets were moved (``OffsetsChangeResult.mode``, the audit trail's ``after.mode``), in words.
OFFSETS_MODES = {
    "offsets": "moved to the offsets given", "earliest": "moved to the earliest", "latest": "moved to the latest",
    "to_timestamp": "moved to a time", "by_duration": "moved to a time ago", "shift_by": "shifted",
    "starting_offsets": "back to the starting offsets",
}


def moved(mode: str) -> str:
    return OFFSETS_MODES.get(mode, mode)


def schedule_text(schedule: Schedule | None) -> str:
    if schedule is None:
        return "manual only"
    if isinstance(schedule, CronSchedule):
        return f"cron {schedule.cron} ({schedule.timezone})"
    if isinstance(schedule, ContinuousSchedule):
        return f"continuously (looks again after {schedule.idle_wait_ms} ms when idle)"
    return f"every {schedule.interval_seconds} s"


@dataclass(frozen=True)
class Firing:
    """When a schedule fires: in UTC, and in the schedule's own time zone (cron)."""

    at: datetime
    local: str


def next_fires(schedule: Schedule | None, *, first: datetime | None = None, count: int = NEXT_FIRES_SHOWN,
               now: datetime | None = None) -> list[Firing]:
    """The next ``count`` firings of ``schedule``: from ``first`` (an active pipeline's next slot, which
    the scheduler keeps) or, without it, from ``now`` as a resume would."""
    if schedule is None or isinstance(schedule, ContinuousSchedule):
        return []  # no slots to show: it runs back to back
    zone = schedule.timezone if isinstance(schedule, CronSchedule) else "UTC"
    moment = first or next_fire(schedule, now or utcnow())
    out: list[Firing] = []
    while moment is not None and len(out) < count:
        out.append(Firing(at=moment, local=f"{moment.astimezone(ZoneInfo(zone)):%a %Y-%m-%d %H:%M} {zone}"))
        moment = next_fire(schedule, moment)
    return out


@dataclass(frozen=True)
class Difference:
    """A field whose saved value is not the one a form sends."""

    field: str
    saved: str
    yours: str


def _flat(doc: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(doc, Mapping) and doc:
        out: dict[str, Any] = {}
        for key, value in doc.items():
            out.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: doc}


def differences(saved: Mapping[str, Any], yours: Mapping[str, Any]) -> list[Difference]:
    """The fields (dotted, as the API names them) where two JSON documents differ, in order."""
    left, right = _flat(saved), _flat(yours)

    def shown(value: Any) -> str:
        return "—" if value is None else value if isinstance(value, str) else json.dumps(value)

    return [Difference(field=name, saved=shown(left.get(name)), yours=shown(right.get(name)))
            for name in sorted(left.keys() | right.keys()) if left.get(name) != right.get(name)]


def share(value: int | None, largest: int | None) -> float:
    """``value`` as a percentage of ``largest`` (for lag bars)."""
    if not value or not largest:
        return 0.0
    return round(min(value / largest, 1) * 100, 2)


@dataclass
class FormErrors:
    """Validation messages by form field, and those belonging to no single field."""

    fields: dict[str, list[str]] = field(default_factory=dict)
    general: list[str] = field(default_factory=list)

    def add(self, name: str | None, message: str) -> None:
        if name:
            self.fields.setdefault(name, []).append(message)
        else:
            self.general.append(message)

    def __bool__(self) -> bool:
        return bool(self.fields or self.general)
