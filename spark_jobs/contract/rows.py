"""One task's contract on the rows it decodes (``decode.split_rows`` applies it to every batch): the
pipeline's expectations tested and counted (``contract.expectations``), then its sensitive fields
protected (``contract.sensitive``), and the quarantine's raw records sealed. Expectations see the
values as decoded; nothing written holds what the pipeline protects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

    from spark_jobs.contract.expectations import Verdicts
    from spark_jobs.contract.sensitive import Protection


@dataclass
class RowContract:
    verdicts: Verdicts | None = None  # the task's counts of the expectations' violations
    protection: Protection | None = None

    def apply(self, rows: pa.Table, reasons: pa.Array) -> tuple[pa.Table, pa.Array]:
        """The rows protected, and ``reasons`` (per row, why its record goes to the quarantine) with the
        expectations' quarantine rules added; raises ``expectation_failed`` for a fail rule's violation."""
        if self.verdicts is not None:
            reasons = self.verdicts.test(rows, reasons)
        if self.protection is not None:
            rows = self.protection.protect(rows)
        return rows, reasons

    def sealed(self, quarantine: pa.Table) -> pa.Table:
        return quarantine if self.protection is None else self.protection.seal(quarantine)
