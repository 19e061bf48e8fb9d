"""A pipeline's runs as charts: records and duration per run as bars, and each partition's lag when
the run was planned as lines; a pipeline's usage as records read per hour or day (``usage_chart``); with a value axis, the runs' times below, and each bar's or point's
values in its ``<title>`` (shown on hover).

Everything is computed here, in the SVG's own units (``WIDTH`` × ``HEIGHT``, scaled uniformly by the
browser so that text keeps its shape), and drawn by ``macros.html``: no script, no inline style, so
the portal's CSP holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from api.runs.schemas import RunRead
from api.usage.schemas import UsageRow

WIDTH, HEIGHT = 300.0, 150.0
LEFT, RIGHT, TOP, BOTTOM = 44.0, 294.0, 8.0, 122.0  # the plot's box; labels go left of and below it
SERIES_SHOWN = 8  # lines of a lag chart: the partitions with the most lag (the palette has as many colours)

_NICE = (1.0, 2.0, 2.5, 5.0, 10.0)
_SECONDS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400)


@dataclass(frozen=True)
class Tick:
    at: float  # y for the value axis, x for the time axis
    label: str


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    title: str
    state: str


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    value: float
    title: str


@dataclass(frozen=True)
class Line:
    name: str
    series: int  # its colour: the class ``series-<n>``
    path: str
    points: list[Point]


@dataclass(frozen=True)
class Chart:
    """One chart's geometry: its axes' ticks, and bars or lines."""

    label: str
    summary: str  # what a screen reader hears for the whole chart
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    bars: list[Bar] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    more: int = 0  # lines left out (the partitions with least lag)
    x_title: str = "start of each run (UTC), oldest left"
    width: float = WIDTH
    height: float = HEIGHT
    left: float = LEFT
    right: float = RIGHT
    top: float = TOP
    bottom: float = BOTTOM


def compact(value: float) -> str:
    """A count for an axis: 950, 1.2k, 35k, 4M."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def seconds(value: float) -> str:
    """A duration for an axis: 250 ms, 45 s, 2 min, 1.5 h."""
    if 0 < value < 1:
        return f"{value * 1000:.3g} ms"
    if value >= 3600:
        return f"{value / 3600:g} h"
    if value >= 60:
        return f"{value / 60:g} min"
    return f"{value:g} s"


def count_step(largest: float, most: int = 4) -> float:
    """A round step (1, 2, 2.5 or 5 × 10ⁿ) that covers ``largest`` in at most ``most`` steps."""
    if largest <= 0:
        return 1.0
    scale = 10 ** math.floor(math.log10(largest / most))
    return next(n * scale for n in _NICE if n * scale * most >= largest)


def seconds_step(largest: float, most: int = 4) -> float:
    """A round step of time (fractions of a second, 1, 2, 5, 10, 15, 30 s, 1, 2, 5 … min, 1, 2 … h)
    covering ``largest``."""
    if largest < 1:
        return count_step(largest, most)
    for step in _SECONDS:
        if step * most >= largest:
            return float(step)
    return count_step(largest / 86400, most) * 86400


def _value_axis(largest: float, step_of: Callable[[float], float], label: Callable[[float], str]
                ) -> tuple[list[Tick], Callable[[float], float]]:
    """Ticks from 0 to the first round value at or above ``largest``, and value → y."""
    step = step_of(largest)
    top = max(math.ceil(largest / step), 1) * step

    def y(value: float) -> float:
        return round(BOTTOM - value / top * (BOTTOM - TOP), 2)

    return [Tick(at=y(i * step), label=label(i * step)) for i in range(round(top / step) + 1)], y


def _moment(run: RunRead) -> datetime:
    return (run.started_at or run.created_at).astimezone(UTC)


def _when(run: RunRead) -> str:
    return _moment(run).strftime("%d %b %H:%M UTC")


def _time_axis(runs: Sequence[RunRead]) -> tuple[list[Tick], Callable[[int], float], float]:
    """Each run's slot (oldest left), time labels under the first, the middle and the last run, and
    the width of a slot."""
    slot = (RIGHT - LEFT) / max(len(runs), 1)

    def x(i: int) -> float:
        return round(LEFT + (i + 0.5) * slot, 2)

    moments = [_moment(r) for r in runs]
    span = (max(moments) - min(moments)).total_seconds() if moments else 0
    shape = "%H:%M:%S" if span < 600 else "%H:%M" if len({m.date() for m in moments}) == 1 else "%d %b %H:%M"
    shown = sorted({0, len(runs) // 2, len(runs) - 1}) if len(runs) >= 5 else sorted({0, len(runs) - 1})
    ticks = [Tick(at=x(i), label=_moment(runs[i]).strftime(shape)) for i in shown if runs]
    return ticks, x, slot


def _bars(runs: Sequence[RunRead], label: str, value: Callable[[RunRead], float | None],
          step_of: Callable[[float], float], axis_label: Callable[[float], str], text: Callable[[float], str]) -> Chart:
    values = [value(r) for r in runs]
    largest = max((v for v in values if v is not None), default=0.0)
    y_ticks, y = _value_axis(largest, step_of, axis_label)
    x_ticks, x, slot = _time_axis(runs)
    width = round(min(slot * 0.7, 24.0), 2)
    bars = []
    for i, (run, v) in enumerate(zip(runs, values, strict=True)):
        if v is None:
            continue
        top = min(y(v), BOTTOM - 1)  # a run of no records is a sliver: something to point at
        bars.append(Bar(x=round(x(i) - width / 2, 2), y=top, width=width, height=round(BOTTOM - top, 2),
                        title=f"Run #{run.seq} · {_when(run)} · {text(v)} · {run.state}", state=run.state))
    shown = [v for v in values if v is not None]
    summary = (f"{label} of the last {len(runs)} runs, oldest first: " + ", ".join(text(v) for v in shown)
               if shown else f"{label}: no run has finished yet")
    return Chart(label=label, summary=summary, y_ticks=y_ticks, x_ticks=x_ticks, bars=bars)


def records_chart(runs: Sequence[RunRead]) -> Chart:
    """Records read by each of ``runs`` (oldest first)."""
    return _bars(runs, "Records per run", lambda r: r.records_read, count_step, compact,
                 lambda v: f"{v:,.0f} records")


def duration_chart(runs: Sequence[RunRead]) -> Chart:
    """How long each of ``runs`` (oldest first) took, start to end."""
    return _bars(runs, "Duration per run", lambda r: r.duration_s, seconds_step, seconds,
                 lambda v: f"{v:,.1f} s")


def lag_chart(runs: Sequence[RunRead]) -> Chart | None:
    """Each partition's lag as each of ``runs`` (oldest first) was planned: the records from where it
    started to the partition's end; the ``SERIES_SHOWN`` partitions with the most lag. None while no
    run has a plan."""
    lags: dict[tuple[str, int], dict[int, int]] = {}
    for i, run in enumerate(runs):
        for p in run.partitions or []:
            if p.latest is not None:
                lags.setdefault((p.topic, p.partition), {})[i] = max(p.latest - p.start, 0)
    if not lags:
        return None
    ranked = sorted(lags, key=lambda tp: (-max(lags[tp].values()), tp))
    shown = sorted(ranked[:SERIES_SHOWN])
    largest = max(max(lags[tp].values()) for tp in shown)
    y_ticks, y = _value_axis(largest, count_step, compact)
    x_ticks, x, _ = _time_axis(runs)
    lines = []
    for n, (topic, partition) in enumerate(shown):
        name, points, path, previous = f"{topic}[{partition}]", [], [], None
        for i, lag in sorted(lags[(topic, partition)].items()):
            title = f"{name} · run #{runs[i].seq} · {_when(runs[i])} · lag {lag:,}"
            point = Point(x=x(i), y=y(lag), value=lag, title=title)
            # A run without a plan for this partition breaks the line rather than bridging it.
            path.append(f"{'L' if previous == i - 1 else 'M'}{point.x} {point.y}")
            points.append(point)
            previous = i
        lines.append(Line(name=name, series=n, path=" ".join(path), points=points))
    summary = f"Lag per partition when each of the last {len(runs)} runs was planned, for " + ", ".join(
        f"{line.name} (last {line.points[-1].value:,.0f})" for line in lines)
    return Chart(label="Lag per partition at each run", summary=summary, y_ticks=y_ticks,
                 x_ticks=x_ticks, lines=lines, more=len(ranked) - len(shown))


def usage_chart(name: str, rows: Sequence[UsageRow], *, start: datetime, end: datetime, step: timedelta) -> Chart:
    """Records read by one pipeline in each hour (or day) from ``start`` to ``end``: one slot per bucket,
    a bucket without usage left empty; rows written and run time in each bar's title."""
    slots = max(round((end - start) / step), 1)
    by_bucket = {row.bucket: row for row in rows}
    largest = max((row.records_read for row in rows), default=0)
    y_ticks, y = _value_axis(float(largest), count_step, compact)
    slot = (RIGHT - LEFT) / slots

    def x(i: int) -> float:
        return round(LEFT + (i + 0.5) * slot, 2)

    shape = "%d %b" if step >= timedelta(days=1) else "%d %b %H:%M"
    width = round(min(slot * 0.7, 24.0), 2)
    bars = []
    for i in range(slots):
        bucket = start + i * step
        row = by_bucket.get(bucket)
        if row is None:
            continue
        top = min(y(row.records_read), BOTTOM - 1)
        bars.append(Bar(x=round(x(i) - width / 2, 2), y=top, width=width, height=round(BOTTOM - top, 2),
                        title=f"{bucket.strftime(shape)} UTC · {row.records_read:,} records read · "
                              f"{row.rows_written:,} rows written · {row.wall_seconds:,.1f} s of runs",
                        state="succeeded"))
    shown = sorted({0, slots // 2, slots - 1})
    x_ticks = [Tick(at=x(i), label=(start + i * step).strftime(shape)) for i in shown]
    unit = "day" if step >= timedelta(days=1) else "hour"
    total = sum(row.records_read for row in rows)
    return Chart(label=f"{name}: records read per {unit}",
                 summary=f"{name}: {total:,} records read in {len(rows)} of {slots} {unit}s",
                 y_ticks=y_ticks, x_ticks=x_ticks, bars=bars, x_title=f"each {unit} (UTC), oldest left")
