"""Classified job failures that survive the trip from a Spark executor to the driver.

An exception raised in a Python task reaches the driver only as text inside a Java stack trace,
so ``JobError`` puts its kind and coordinates in a tagged JSON prefix that ``classify`` finds again.
"""

from __future__ import annotations

import json
import re
from typing import Literal, cast

# The kinds a job reports itself; ``spec.ErrorKind`` adds those the launcher sets.
JobErrorKind = Literal[
    "data_loss",
    "kafka_unavailable",
    "kafka_auth",
    "target_write",
    "target_commit",
    "invalid_spec",
    "internal",
]

_TAG = re.compile(r"\[inlet-error (\{[^}]*\})\] ([^\n]*)")


class JobError(Exception):
    def __init__(self, kind: JobErrorKind, message: str, topic: str | None = None, partition: int | None = None):
        self.kind, self.message, self.topic, self.partition = kind, message, topic, partition
        tag = json.dumps({"kind": kind, "topic": topic, "partition": partition})
        super().__init__(f"[inlet-error {tag}] {message}")


def classify(exc: BaseException) -> JobError:
    """The first ``JobError`` named in ``exc``'s text, else an ``internal`` one."""
    if isinstance(exc, JobError):
        return exc
    text = str(exc)
    match = _TAG.search(text)
    if match:
        tag = json.loads(match.group(1))
        # The tag was written by a JobError's constructor, so its kind is one of JobErrorKind.
        return JobError(cast(JobErrorKind, tag["kind"]), match.group(2), tag["topic"], tag["partition"])
    first_line = next((line for line in text.splitlines() if line.strip()), type(exc).__name__)
    return JobError("internal", f"{type(exc).__name__}: {first_line[:2000]}")
