"""What the portal's templates need beyond the services' own objects: ages and durations in words,
chart geometry for inline SVG, and validation errors sorted to the form field they concern."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from api.core.db import utcnow

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


def sort_errors(errors: Iterable[Mapping[str, Any]], routes: Mapping[str, str], *, drop: Iterable[str] = (),
                strip: Iterable[str] = ()) -> FormErrors:
    """Problem ``errors`` (``{field, message}``) → form fields via ``routes`` (error field prefix → form
    field; the longest matching prefix wins). ``drop``: error fields containing one of these are ignored
    (the other members of a union the form did not choose); ``strip``: segments removed first."""
    out = FormErrors()
    dropped = tuple(drop)
    for error in errors:
        name = str(error.get("field", ""))
        if any(d in name for d in dropped):
            continue
        for segment in strip:
            name = name.replace(f".{segment}", "")
        message = str(error.get("message", "invalid")).removeprefix("Value error, ")
        best = max((prefix for prefix in routes if name == prefix or name.startswith((prefix + ".", prefix + "["))),
                   key=len, default=None)
        out.add(routes[best] if best is not None else None, message)
    return out
