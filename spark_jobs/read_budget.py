"""What one task's reading of Kafka may hold, whatever its records hold.

Kafka bounds a fetch by its compressed bytes; a record batch of zeros gzip'd 1,000 to 1 passes every
such bound and is a thousand times larger once read. So a run's reading is bounded after
decompression, by ``ReadBudget``:

- A record (its key and value, and its headers where the run reads them) larger than
  ``max_record_bytes`` fails the run as ``record_too_large``, naming its partition and offset and the
  bound, before its value is copied out of the Kafka client. It is not retried (the record stays what
  it is) and it does not go to the quarantine table, where it would cost what it costs here: the
  pipeline's owner moves the partition's offset past it, or the operator raises the bound.
- A chunk's records go on in Arrow batches of at most ``max_batch_bytes`` (or 20,000 records, which
  comes first): a batch goes on once it holds half the bound, and each consume takes as many records
  as fit half a batch, were they as large as the largest of late (``ConsumeSizing``). So a task holds
  one batch, what the Kafka client has queued (``queued.max.messages.kbytes``) and one record.
- A partition that makes no progress for ``stall_timeout_s`` fails the run as ``kafka_unavailable``.

The worker fills the budget from its settings (``INLET_RUN_MAX_RECORD_BYTES``,
``INLET_RUN_MAX_BATCH_BYTES``); what a whole engine holds is bounded besides, while the run runs
(``worker.launch.warm``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spark_jobs.errors import JobError

if TYPE_CHECKING:  # the spec, and through it the API, imports the budget: numpy and pyarrow only where read
    import numpy as np
    import pyarrow as pa
    from confluent_kafka import Message

MIB = 1 << 20


@dataclass(frozen=True)
class ReadBudget:
    stall_timeout_s: float = 120.0
    max_record_bytes: int = 32 * MIB
    max_batch_bytes: int = 64 * MIB

    @property
    def flush_bytes(self) -> int:
        """A chunk's batch goes on once it holds this much: half its bound, so that the consume that
        took it there (sized to this much, ``ConsumeSizing``) keeps it under the bound."""
        return max(1, self.max_batch_bytes // 2)

    def too_large(self, topic: str, partition: int, offset: int, size: int) -> JobError:
        """The run's failure at a record of ``size`` bytes past ``max_record_bytes``."""
        return JobError(
            "record_too_large",
            f"{topic}[{partition}] at offset {offset}: the record holds {size:,} bytes once decompressed, past the "
            f"run's bound of {self.max_record_bytes:,} (INLET_RUN_MAX_RECORD_BYTES); move the partition's offset "
            f"past it to go on without it",
            topic, partition,
        )

    def refuse_oversized(self, messages: list[Message], sizes: np.ndarray,
                         reads: Callable[[tuple[str, int], int], bool]) -> None:
        """Fail the run at the first of ``messages`` (each of ``sizes`` bytes) past the bound that the run
        ``reads`` (a paused partition's last fetched records, or those past a chunk's end, are not its)."""
        import numpy as np
        for i in np.flatnonzero(sizes > self.max_record_bytes):
            message = messages[int(i)]
            topic, partition, offset = str(message.topic()), int(message.partition() or 0), message.offset()
            if offset is not None and reads((topic, partition), offset):
                raise self.too_large(topic, partition, offset, int(sizes[i]))


class ConsumeSizing:
    """How many records a reader's next consume may take: as many as fit half a batch, were they all
    as large as the largest of late. The first as large as a record may be; then the largest of the last
    consume, or half the size before, whichever is larger (a large record now and then does not slow
    every consume after it for long)."""

    def __init__(self, budget: ReadBudget, most: int) -> None:
        self.budget, self.most = budget, most
        self.per_record = budget.max_record_bytes
        self.records = max(1, min(most, budget.flush_bytes // self.per_record))

    def consumed(self, largest: int) -> None:
        """After a consume whose largest record held ``largest`` bytes (0: none taken)."""
        if largest:
            self.per_record = max(largest, self.per_record // 2, 1)
            self.records = max(1, min(self.most, self.budget.flush_bytes // self.per_record))


def header_bytes(headers: pa.ListArray) -> np.ndarray:
    """Each record's header bytes (keys and values), one number a record."""
    import numpy as np
    import pyarrow.compute as pc
    pairs = headers.flatten()
    lengths = pc.add(pc.binary_length(pairs.field("key")).fill_null(0), pc.binary_length(pairs.field("value")).fill_null(0))
    owners = headers.value_parent_indices().to_numpy()
    return np.bincount(owners, weights=lengths.to_numpy(), minlength=len(headers)).astype(np.int64)
