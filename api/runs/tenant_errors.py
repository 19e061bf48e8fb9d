"""A run's error as its tenant reads it (``GET /runs/{id}``, webhooks, the portal): what went wrong in
words it can act on, never the server's insides. The job's own message can carry them, above all a
crashed job's last lines of output: JVM and Python stack frames, the server's absolute paths (its
storage root, a run's private folder). ``for_tenant`` keeps the message up to its first stack frame
and shows a path under the tenant's storage folder as the tenant wrote it (``bronze/orders``), any
other absolute path as ``<server path>``. The whole message stays in the operator's log, with the
run's id (``execution.record_result``).
"""

from __future__ import annotations

import re

MAX_CHARS = 1000

# Where a stack trace begins: a JVM frame or cause, a Python traceback or frame.
_TRACE = re.compile(r"\s+at [\w$./]+\(|\s*Caused by: |Traceback \(most recent call last\)|\s*File \"/")
# An absolute path, or a file: URI, on the server (not a URL's path: no scheme or host before it).
_PATH = re.compile(r"(?<![\w.:/-])(?:file:(?://)?)?/(?:[\w.@%+=,~-]+/)*[\w.@%+=,~-]+/?")
_TENANT_FOLDER = re.compile(r"/tenants/[0-9a-fA-F-]{36}/")


def for_tenant(message: str) -> str:
    """``message`` without stack frames or server paths, at most ``MAX_CHARS`` long."""
    cut = _TRACE.search(message)
    kept = (message[:cut.start()] if cut else message).strip()
    shown = _PATH.sub(_shown, kept)
    return shown if len(shown) <= MAX_CHARS else shown[:MAX_CHARS - 1] + "…"


def _shown(found: re.Match[str]) -> str:
    path = found.group(0)
    inside = _TENANT_FOLDER.search(path)
    return path[inside.end():] if inside else "<server path>"
