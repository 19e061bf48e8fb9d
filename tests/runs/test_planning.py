"""Planning's rules (``api.runs.planning.compute_plan``), with every input given: no broker, no database."""

from __future__ import annotations

from api.runs.planning import PartitionPlan, Plan, compute_plan
from tests.factories import kafka_source

SOURCE = kafka_source(topics=["orders"])


def _ranges(plan: Plan) -> dict[tuple[str, int], tuple[int, int]]:
    return {(p.topic, p.partition): (p.start, p.end) for p in plan.partitions}


def test_a_read_partition_goes_from_its_committed_offset_to_the_latest() -> None:
    plan = compute_plan(source=SOURCE, committed={("orders", 0): 40, ("orders", 1): 7},
                        watermarks={("orders", 0): (0, 100), ("orders", 1): (5, 7)}, max_offsets=None)
    assert plan.partitions == [
        PartitionPlan(topic="orders", partition=0, start=40, end=100, earliest=0, latest=100, committed=40),
        PartitionPlan(topic="orders", partition=1, start=7, end=7, earliest=5, latest=7, committed=7),
    ]
    assert (plan.total, plan.lag) == (60, 60)
    assert plan.ranges() == {"orders": {"0": [40, 100]}}  # an empty range is not sent to the job


def test_a_never_read_partition_starts_where_the_source_says() -> None:
    watermarks = {("orders", 0): (10, 50), ("orders", 1): (0, 30), ("orders", 2): (0, 30)}
    earliest = compute_plan(source=SOURCE, committed={}, watermarks=watermarks, max_offsets=None)
    latest = compute_plan(source=kafka_source(topics=["orders"], starting_offsets="latest"), committed={},
                          watermarks=watermarks, max_offsets=None)
    listed = compute_plan(source=kafka_source(topics=["orders"], starting_offsets={"orders": {"1": 12}}), committed={},
                          watermarks=watermarks, max_offsets=None)
    assert _ranges(earliest) == {("orders", 0): (10, 50), ("orders", 1): (0, 30), ("orders", 2): (0, 30)}
    assert _ranges(latest) == {("orders", 0): (50, 50), ("orders", 1): (30, 30), ("orders", 2): (30, 30)}
    # Spark's rule: a partition the per-partition map leaves out starts at earliest.
    assert _ranges(listed) == {("orders", 0): (10, 50), ("orders", 1): (12, 30), ("orders", 2): (0, 30)}
    assert all(p.committed is None for p in earliest.partitions)


def test_positions_looked_up_by_timestamp_win_over_starting_offsets() -> None:
    plan = compute_plan(source=kafka_source(topics=["orders"], starting_offsets="latest"), committed={("orders", 1): 3},
                        watermarks={("orders", 0): (0, 50), ("orders", 1): (0, 50)}, max_offsets=None,
                        positions={("orders", 0): 21})
    assert _ranges(plan) == {("orders", 0): (21, 50), ("orders", 1): (3, 50)}


def test_a_committed_offset_past_the_end_reads_nothing_rather_than_guessing() -> None:
    """A topic deleted and recreated: its offsets restart below the committed one."""
    plan = compute_plan(source=SOURCE, committed={("orders", 0): 500}, watermarks={("orders", 0): (0, 20)},
                        max_offsets=None)
    assert _ranges(plan) == {("orders", 0): (500, 500)}
    assert (plan.total, plan.lag) == (0, 0)


def test_the_cap_is_shared_in_proportion_to_each_partitions_backlog() -> None:
    plan = compute_plan(source=SOURCE, committed={("orders", 0): 0, ("orders", 1): 0},
                        watermarks={("orders", 0): (0, 100), ("orders", 1): (0, 300)}, max_offsets=40)
    assert _ranges(plan) == {("orders", 0): (0, 10), ("orders", 1): (0, 30)}
    assert (plan.total, plan.lag) == (40, 400)


def test_under_the_cap_a_small_backlog_still_moves() -> None:
    """A share below one record is rounded up, so a partition with little backlog is never starved."""
    plan = compute_plan(source=SOURCE, committed={("orders", 0): 0, ("orders", 1): 0},
                        watermarks={("orders", 0): (0, 1), ("orders", 1): (0, 1000)}, max_offsets=10)
    assert _ranges(plan) == {("orders", 0): (0, 1), ("orders", 1): (0, 9)}


def test_a_backlog_within_the_cap_is_read_whole() -> None:
    plan = compute_plan(source=SOURCE, committed={("orders", 0): 0}, watermarks={("orders", 0): (0, 25)},
                        max_offsets=25)
    assert _ranges(plan) == {("orders", 0): (0, 25)}


def test_a_plan_survives_its_round_trip_through_the_database() -> None:
    plan = compute_plan(source=SOURCE, committed={("orders", 0): 4}, watermarks={("orders", 0): (0, 9),
                                                                                ("orders", 1): (2, 6)}, max_offsets=None)
    stored = plan.to_json()
    assert stored["total"] == 9
    assert Plan.from_json(stored) == plan
