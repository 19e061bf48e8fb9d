"""When a pipeline's schedule fires next: cron in a timezone, or a fixed interval."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter


def next_fire(schedule: dict[str, Any] | None, after: datetime) -> datetime | None:
    """The first firing strictly after ``after`` (UTC), or None for an unscheduled pipeline."""
    if not schedule:
        return None
    if "interval_seconds" in schedule:
        return after + timedelta(seconds=int(schedule["interval_seconds"]))
    zone = ZoneInfo(schedule.get("timezone", "UTC"))
    fire = croniter(schedule["cron"], after.astimezone(zone)).get_next(datetime)
    return fire.astimezone(UTC)
