"""The portal's charts and views on their own: round axes, each bar's and point's values and time in
its title, lag lines that break where a run has no plan, a schedule's next firings, and what differs
between a saved object and a form."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from api.pipelines.schedules import CronSchedule, IntervalSchedule
from api.portal import charts, views
from api.runs.schemas import RunPartition, RunRead

START = datetime(2024, 5, 14, 13, 0, tzinfo=UTC)


def _run(seq: int, *, records: int | None = None, seconds: float | None = None, state: str = "succeeded",
         lags: dict[int, int] | None = None, at: datetime | None = None) -> RunRead:
    created = at or START + timedelta(minutes=5 * seq)
    partitions = None if lags is None else [
        RunPartition(topic="orders", partition=p, start=100, end=100 + lag, earliest=0, latest=100 + lag)
        for p, lag in lags.items()]
    fields: dict[str, Any] = {
        "id": uuid.uuid4(), "pipeline_id": uuid.uuid4(), "seq": seq, "state": state, "trigger": "manual",
        "scheduled_for": None, "attempt": 1, "cancel_requested": False, "partitions": partitions,
        "replace_ranges": None, "records_read": records, "rows_written": records, "rows_quarantined": 0,
        "bytes_read": None, "delta_version": None, "already_committed": None, "error": None, "created_at": created,
        "started_at": created, "finished_at": created + timedelta(seconds=seconds) if seconds is not None else None,
        "duration_s": seconds,
    }
    return RunRead(**fields)


@pytest.mark.parametrize(("largest", "step"), [(0, 1), (3, 1), (7, 2), (40, 10), (95, 25), (1234, 500), (9e6, 2.5e6)])
def test_count_axes_end_on_a_round_value(largest: float, step: float) -> None:
    assert charts.count_step(largest) == step


@pytest.mark.parametrize(("largest", "step", "labels"), [
    (0.1, 0.025, ["0 s", "25 ms", "50 ms", "75 ms", "100 ms"]), (3.2, 1, ["0 s", "1 s", "2 s", "3 s", "4 s"]), (95, 30, ["0 s", "30 s", "1 min", "1.5 min", "2 min"]),
    (4000, 1800, ["0 s", "30 min", "1 h", "1.5 h"]),
])
def test_time_axes_step_in_seconds_minutes_and_hours(largest: float, step: float, labels: list[str]) -> None:
    assert charts.seconds_step(largest) == step
    chart = charts.duration_chart([_run(1, seconds=largest)])
    assert [t.label for t in chart.y_ticks] == labels
    assert chart.y_ticks[0].at == charts.BOTTOM and chart.y_ticks[-1].at == charts.TOP


def test_bars_carry_their_run_time_and_value_and_sit_on_the_axis() -> None:
    runs = [_run(1, records=1200, seconds=2.5), _run(2, records=0, seconds=1.0, state="failed"), _run(3, state="running")]
    chart = charts.records_chart(runs)
    assert [t.label for t in chart.y_ticks] == ["0", "500", "1k", "1.5k"]
    assert [b.title for b in chart.bars] == ["Run #1 · 14 May 13:05 UTC · 1,200 records · succeeded",
                                             "Run #2 · 14 May 13:10 UTC · 0 records · failed"]
    assert all(round(b.y + b.height, 2) == charts.BOTTOM for b in chart.bars)
    assert chart.bars[1].height == 1 and chart.bars[1].state == "failed"  # a run of nothing is still something to point at
    assert chart.bars[0].height == round((charts.BOTTOM - charts.TOP) * 1200 / 1500, 2)
    assert [t.label for t in chart.x_ticks] == ["13:05", "13:15"]  # the first and the last run, one day: times only
    assert chart.summary == "Records per run of the last 3 runs, oldest first: 1,200 records, 0 records"


def test_runs_over_days_are_labelled_with_their_date() -> None:
    runs = [_run(i, records=i, at=START + timedelta(hours=10 * i)) for i in range(6)]
    chart = charts.records_chart(runs)
    assert [t.label for t in chart.x_ticks] == ["14 May 13:00", "15 May 19:00", "16 May 15:00"]  # first, middle, last
    xs = [t.at for t in chart.x_ticks]
    assert xs == sorted(xs) and xs[0] > charts.LEFT and xs[-1] < charts.RIGHT


def test_lag_lines_follow_each_partition_and_break_where_a_run_had_no_plan() -> None:
    runs = [_run(1, lags={0: 500, 1: 40}), _run(2), _run(3, lags={0: 200, 1: 0}), _run(4, lags={0: 0})]
    chart = charts.lag_chart(runs)
    assert chart is not None
    assert [(line.name, [p.value for p in line.points]) for line in chart.lines] == [
        ("orders[0]", [500, 200, 0]), ("orders[1]", [40, 0])]
    zero, _ = chart.lines
    assert zero.path.count("M") == 2 and zero.path.count("L") == 1  # runs 1 | 3 - 4
    assert zero.points[0].title == "orders[0] · run #1 · 14 May 13:05 UTC · lag 500"
    assert [t.label for t in chart.y_ticks] == ["0", "200", "400", "600"]
    assert chart.summary.endswith("orders[0] (last 0), orders[1] (last 0)")
    assert charts.lag_chart([_run(1), _run(2)]) is None


def test_a_lag_chart_draws_the_partitions_with_most_lag() -> None:
    runs = [_run(1, lags={p: p * 10 for p in range(12)})]
    chart = charts.lag_chart(runs)
    assert chart is not None and chart.more == 4
    assert sorted(line.name for line in chart.lines) == sorted(f"orders[{p}]" for p in range(4, 12))
    assert [line.series for line in chart.lines] == list(range(charts.SERIES_SHOWN))


def test_a_schedules_next_firings_are_in_its_time_zone() -> None:
    now = datetime(2024, 3, 30, 12, 0, tzinfo=UTC)  # Paris moves to summer time on the 31st
    daily = views.next_fires(CronSchedule(cron="30 6 * * *", timezone="Europe/Paris"), now=now, count=3)
    assert [(f.at.isoformat(), f.local) for f in daily] == [
        ("2024-03-31T04:30:00+00:00", "Sun 2024-03-31 06:30 Europe/Paris"),
        ("2024-04-01T04:30:00+00:00", "Mon 2024-04-01 06:30 Europe/Paris"),
        ("2024-04-02T04:30:00+00:00", "Tue 2024-04-02 06:30 Europe/Paris")]
    slot = now + timedelta(minutes=7)
    every = views.next_fires(IntervalSchedule(interval_seconds=600), first=slot, now=now, count=2)
    assert [f.at for f in every] == [slot, slot + timedelta(minutes=10)] and every[0].local.endswith("UTC")
    assert views.next_fires(None) == []


def test_differences_name_fields_as_the_api_does() -> None:
    saved = {"name": "orders", "schedule": {"interval_seconds": 600}, "source": {"topics": ["a"], "schema": "x" * 200}}
    yours = {"name": "orders", "schedule": {"cron": "*/5 * * * *"}, "source": {"topics": ["a", "b"], "schema": "x" * 200}}
    assert views.differences(saved, yours) == [
        views.Difference("schedule.cron", "—", "*/5 * * * *"), views.Difference("schedule.interval_seconds", "600", "—"),
        views.Difference("source.topics", '["a"]', '["a", "b"]')]
