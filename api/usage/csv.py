"""A usage report as CSV: one line per row of the JSON report, the run outcomes flattened."""

from __future__ import annotations

import csv
import io

from api.usage.schemas import UsageReport

COLUMNS = (
    "tenant_id", "pipeline_id", "pipeline_name", "bucket", "records_read", "rows_written", "rows_quarantined",
    "rows_violating", "bytes_read", "bytes_written", "wall_seconds", "engine_seconds", "runs_succeeded", "runs_failed",
    "runs_retried", "runs_cancelled", "runs_skipped",
)


def report_csv(report: UsageReport) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in report.items:
        flat = row.model_dump(mode="json", exclude={"runs"})
        flat |= {f"runs_{outcome}": count for outcome, count in row.runs.model_dump().items()}
        writer.writerow(["" if flat[c] is None else flat[c] for c in COLUMNS])
    return out.getvalue()
