"""Classified job failures that survive the trip from a Spark executor to the driver.

An exception raised in a Python task reaches the driver only as text inside a Java stack trace,
so ``JobError`` puts its kind and coordinates in a tagged JSON prefix that ``classify`` finds again.
An untagged one is known by its root cause, the Python exception at the end of the task's
traceback: storage errors (pyarrow's and delta-rs's) become a kind a user can act on.
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
    "registry_unavailable",  # the schema registry could not be reached, timed out or answered 5xx
    "registry_auth",  # the schema registry refused the credentials
    "schema_not_found",  # the registry has no such subject or version
    "schema_incompatible",  # the subject's schema cannot go into the table (a field changed its type)
    "schema_changed",  # a record uses a newer version of the subject than the run read: the next attempt reads it
    "storage_unreachable",  # the object store's endpoint could not be reached (DNS, connection, timeout)
    "storage_denied",  # the store refused the credentials or the permission
    "storage_not_found",  # the bucket (or container) does not exist
    "target_write",
    "target_commit",
    "target_conflict",  # a replace commit lost to a concurrent rewrite (table maintenance): retried, planned again
    "invalid_spec",
    "record_too_large",  # a record past the run's bound once decompressed (read_budget): not retried
    "table_unsupported",  # the table uses a Delta feature the operation cannot write correctly (table_features)
    "expectation_failed",  # a row violated an expectation whose action is fail (contract.expectations): not retried
    "cancelled",  # the run was cancelled (or timed out) and the job stopped before committing
    "internal",
]

_TAG = re.compile(r"\[inlet-error (\{[^}]*\})\] ([^\n]*)")
# The exception line that ends a Python traceback: ``OSError: When resolving region ...``.
_RAISED = re.compile(r"^([A-Za-z_][\w.]*): (.+)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Exceptions raised by storage clients: pyarrow's filesystems (OSError and subclasses), delta-rs.
_STORAGE_TYPES = frozenset({"OSError", "IOError", "PermissionError", "FileNotFoundError", "ConnectionError",
                            "TimeoutError", "ArrowIOError", "DeltaError", "CommitFailedError"})
# First match wins: a message naming a refused credential is storage_denied even if it was retried.
_STORAGE_KINDS: tuple[tuple[JobErrorKind, re.Pattern[str]], ...] = (
    ("storage_not_found", re.compile(r"NoSuchBucket|bucket does not exist|ContainerNotFound", re.IGNORECASE)),
    ("storage_denied", re.compile(
        r"AccessDenied|Access Denied|InvalidAccessKeyId|SignatureDoesNotMatch|ExpiredToken|InvalidToken|"
        r"AuthorizationPermissionMismatch|AuthenticationFailed|\bForbidden\b|\b403\b|ACCESS_DENIED|"
        r"No credentials|Unable to load credentials|missing credentials|Permission denied", re.IGNORECASE)),
    ("storage_unreachable", re.compile(
        r"resolve host|NETWORK_CONNECTION|Connection refused|Failed to connect|connect error|dns error|"
        r"error sending request|timed out|Timeout was reached|Connection reset|service unavailable|\b503\b", re.IGNORECASE)),
)


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
    raised = root_cause(text)
    name, message = raised if raised else (type(exc).__name__, text)
    return _storage_error(name, message) or JobError("internal", f"{name}: {_one_line(message.splitlines()[0] if message else '')}")


def root_cause(text: str) -> tuple[str, str] | None:
    """The type and message of the exception that ended the last Python traceback in ``text`` (a
    task's traceback inside Spark's error), if there is one."""
    raised: tuple[str, list[str]] | None = None
    in_traceback = False
    for line in text.splitlines():
        if line.rstrip().endswith("Traceback (most recent call last):"):
            in_traceback, raised = True, None
        elif in_traceback and line.strip() and not line[0].isspace():
            match = _RAISED.match(line.strip())
            raised = (match.group(1).rsplit(".", 1)[-1], [match.group(2)]) if match else None
            in_traceback = False
        elif raised is not None and not in_traceback:
            if not line.strip() or line.startswith(("\tat ", "During handling")):
                break  # the message ends where Spark's (Java) frames or the next exception begin
            raised[1].append(line)
    return (raised[0], "\n".join(raised[1])) if raised else None


def storage_failure(exc: BaseException) -> JobError | None:
    """``exc`` as a storage kind, if a storage client raised it for a reason a user can act on."""
    return _storage_error(type(exc).__name__, str(exc))


def _storage_error(name: str, message: str) -> JobError | None:
    if name not in _STORAGE_TYPES:
        return None
    flat = _one_line(message)
    kind = next((kind for kind, pattern in _STORAGE_KINDS if pattern.search(flat)), None)
    return JobError(kind, f"{name}: {flat}"[:2000]) if kind else None


def _one_line(message: str) -> str:
    """delta-rs's multi-line, coloured cause chains (``Generic S3 error ↳ ... ↳ 404 Not Found``) on one line."""
    lines = (_ANSI.sub("", line).strip().lstrip("↳").strip() for line in message.splitlines())
    return " ↳ ".join(line for line in lines if line)[:2000]
