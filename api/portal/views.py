"""What the portal's templates need beyond the services' own objects: ages and durations in words,
chart geometry for inline SVG, and a form's validation messages by input."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from api.core.db import utcnow
from api.runs.schemas import RunRead

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


def schedule_text(schedule: Mapping[str, Any] | None) -> str:
    if not schedule:
        return "manual only"
    if "cron" in schedule:
        return f"cron {schedule['cron']} ({schedule.get('timezone', 'UTC')})"
    return f"every {schedule['interval_seconds']} s"


@dataclass(frozen=True)
class Bar:
    x: float
    height: float
    label: str
    title: str


def bars(values: Iterable[tuple[str, float | None, str]], *, height: float = 60, width: float = 300) -> list[Bar]:
    """Bars for an inline SVG of ``height`` × ``width``: one per (label, value, title), scaled to the largest."""
    rows = list(values)
    top = max((v or 0 for _, v, _ in rows), default=0) or 1
    step = min(width / max(len(rows), 1), 30.0)  # a few runs stay narrow bars, not one wide block
    return [Bar(x=i * step, height=round((v or 0) / top * (height - 2), 2), label=label, title=title)
            for i, (label, v, title) in enumerate(rows)]


def run_charts(runs: Sequence[RunRead]) -> tuple[list[Bar], list[Bar]]:
    """Records read and duration of ``runs`` (newest first) as bars, oldest left."""
    chronological = list(reversed(runs))
    return (bars((f"#{r.seq}", r.records_read, f"run {r.seq}: {number(r.records_read)} records") for r in chronological),
            bars((f"#{r.seq}", r.duration_s, f"run {r.seq}: {duration(r.duration_s)}") for r in chronological))


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
