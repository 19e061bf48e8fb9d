"""How offsets changes resolve their targets, with a stand-in Kafka client.

The sandbox Kafka cannot serve timestamp lookups (ListOffsets by time answers -1 there), so the
to_timestamp/by_duration resolution is tested here against ``TimestampBroker``, a stand-in under
tests/ that answers as a real broker does: the first offset whose timestamp is at or after the time
asked, or -1 (TimestampNotResolvable) past a partition's last record. The API's error against the
real sandbox is tested in test_offsets_api.py."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pytest

from api.kafka.client import Partition
from api.kafka.errors import TimestampNotResolvable
from api.ledger.positions import starting_positions
from api.offsets.schemas import OffsetsPatch
from api.offsets.service import (
    OffsetsOutOfRange,
    TimestampUnresolved,
    UnknownPartitions,
    WantedOffset,
    check_ranges,
    resolve_targets,
)
from api.pipelines.schemas import KafkaSource
from api.runs.planning import compute_plan
from tests.factories import kafka_source

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
T0 = int((NOW - timedelta(hours=3)).timestamp() * 1000)
WATERMARKS = {("orders", 0): (0, 30), ("orders", 1): (10, 30)}


class TimestampBroker:
    """Records at one per minute from ``T0``: offset ``earliest + i`` has timestamp ``T0 + i min``."""

    def __init__(self) -> None:
        self.asked: list[tuple[list[Partition], int]] = []

    def list_topics(self) -> dict[str, int]:
        return {"orders": 2}

    def watermarks(self, partitions: Iterable[Partition]) -> dict[Partition, tuple[int, int]]:
        return {tp: WATERMARKS[tp] for tp in partitions}

    def offsets_for_timestamp(self, partitions: Iterable[Partition], timestamp_ms: int) -> dict[Partition, int]:
        wanted = sorted(partitions)
        self.asked.append((wanted, timestamp_ms))
        out, missing = {}, []
        for tp in wanted:
            earliest, latest = WATERMARKS[tp]
            index = max(0, -(-(timestamp_ms - T0) // 60_000))  # ceil: first record at or after the time
            if earliest + index >= latest:
                missing.append(tp)
            out[tp] = earliest + index
        if missing:
            raise TimestampNotResolvable(timestamp_ms, missing, "the broker returned no offset")
        return out


def _resolve(body: dict, committed: dict[Partition, int] | None = None, broker: TimestampBroker | None = None) -> list[WantedOffset]:
    return resolve_targets(OffsetsPatch.model_validate(body),
                           source=kafka_source(topics=["orders"], starting_offsets="earliest"),
                           watermarks=WATERMARKS, committed=committed or {}, client=broker or TimestampBroker(), now=NOW)


def test_to_timestamp_asks_the_broker_for_the_first_offset_at_or_after_the_time() -> None:
    broker = TimestampBroker()
    targets = _resolve({"to_timestamp": (NOW - timedelta(hours=3) + timedelta(minutes=5, seconds=30)).isoformat()},
                       committed={("orders", 0): 25}, broker=broker)
    assert [(t.partition, t.before, t.wanted) for t in targets] == [(0, 25, 6), (1, None, 16)]
    assert broker.asked == [([("orders", 0), ("orders", 1)], T0 + 5 * 60_000 + 30_000)]


def test_by_duration_is_a_timestamp_lookup_back_from_now() -> None:
    broker = TimestampBroker()
    targets = _resolve({"by_duration": "PT2H50M", "partitions": [1]}, broker=broker)
    assert [(t.partition, t.wanted) for t in targets] == [(1, 20)]
    assert broker.asked == [([("orders", 1)], int((NOW - timedelta(hours=2, minutes=50)).timestamp() * 1000))]


def test_a_time_past_a_partitions_last_record_is_refused_naming_it_never_guessed() -> None:
    with pytest.raises(TimestampUnresolved) as caught:
        _resolve({"by_duration": "PT2H35M"})  # index 25: inside partition 0's 30 records, past partition 1's 20
    assert caught.value.status == 422
    assert caught.value.extra["partitions"] == [{"topic": "orders", "partition": 1}]
    assert "orders[1]" in caught.value.detail and "orders[0]" not in caught.value.detail
    assert caught.value.errors == [{"field": "by_duration", "type": "timestamp_unresolvable",
                                    "message": f"orders[1]: no offset at or after {(NOW - timedelta(hours=2, minutes=35)).isoformat()}"}]


def test_shift_by_moves_from_the_committed_offset_or_the_starting_position() -> None:
    targets = _resolve({"shift_by": -5}, committed={("orders", 0): 12})
    assert [(t.partition, t.before, t.wanted) for t in targets] == [(0, 12, 7), (1, None, 5)]


def test_check_ranges_refuses_or_clamps() -> None:
    targets = [WantedOffset("orders", 0, 12, 7, 0, 30), WantedOffset("orders", 1, None, 5, 10, 40),
               WantedOffset("orders", 2, 3, 99, 0, 50)]
    with pytest.raises(OffsetsOutOfRange) as caught:
        check_ranges(targets, clamp=False)
    assert [e["field"] for e in caught.value.errors] == ["offsets.orders[1]", "offsets.orders[2]"]
    rows = check_ranges(targets, clamp=True)
    assert [(r.partition, r.after, r.clamped) for r in rows] == [(0, 7, False), (1, 10, True), (2, 50, True)]


def test_scope_names_unknown_partitions() -> None:
    with pytest.raises(UnknownPartitions) as caught:
        _resolve({"reset": "earliest", "partitions": [0, 2, 3]})
    assert caught.value.extra["unknown"] == ["orders[2]", "orders[3]"]


# starting_timestamp: where never-read partitions start, resolved by the broker (api.runs.planning).

def _timestamp_source(minutes: int, strategy: str = "error") -> KafkaSource:
    moment = NOW - timedelta(hours=3) + timedelta(minutes=minutes)
    return kafka_source(topics=["orders"], starting_offsets="earliest", starting_timestamp=moment.isoformat(),
                        starting_timestamp_strategy=strategy)


def test_a_starting_timestamp_is_one_lookup_for_the_never_read_partitions() -> None:
    broker = TimestampBroker()
    positions = starting_positions(broker, _timestamp_source(5), [("orders", 0), ("orders", 1)], WATERMARKS)
    assert positions == {("orders", 0): 5, ("orders", 1): 15}
    assert broker.asked == [([("orders", 0), ("orders", 1)], T0 + 5 * 60_000)]
    plan = compute_plan(source=_timestamp_source(5), committed={("orders", 0): 20}, watermarks=WATERMARKS,
                        max_offsets=None, positions={("orders", 1): 15})
    assert [(p.partition, p.start, p.end, p.committed) for p in plan.partitions] == [(0, 20, 30, 20), (1, 15, 30, None)]


def test_a_starting_timestamp_past_the_last_record_fails_or_starts_at_latest() -> None:
    partitions = [("orders", 0), ("orders", 1)]
    with pytest.raises(TimestampNotResolvable) as caught:  # index 25: past partition 1's 20 records
        starting_positions(TimestampBroker(), _timestamp_source(25), partitions, WATERMARKS)
    assert caught.value.partitions == [("orders", 1)]
    assert starting_positions(TimestampBroker(), _timestamp_source(25, "latest"), partitions, WATERMARKS) == {
        ("orders", 0): 25, ("orders", 1): 30}


def test_a_reset_to_the_starting_position_resolves_the_timestamp_or_says_why_not() -> None:
    def reset(source: KafkaSource) -> list[WantedOffset]:
        return resolve_targets(None, source=source, watermarks=WATERMARKS, committed={("orders", 0): 29},
                               client=TimestampBroker(), now=NOW)

    assert [(t.partition, t.wanted) for t in reset(_timestamp_source(5))] == [(0, 5), (1, 15)]
    with pytest.raises(TimestampUnresolved) as caught:
        reset(_timestamp_source(25))
    assert caught.value.errors[0]["field"] == "starting_timestamp"
    assert caught.value.extra["partitions"] == [{"topic": "orders", "partition": 1}]
