"""Topic patterns: a tenant's regex over topic names, matched in time linear in the name.

Python's ``re`` backtracks: ``(a+)+c`` against a 26-character topic took seconds, and the API
served nobody else meanwhile. RE2 (PyPI's ``google-re2``; not ``pyre2``, which falls back to
``re`` for some patterns) never backtracks. What it cannot match in linear time (backreferences,
lookaround) it refuses, so such a pattern is a 422 when the pipeline is defined, never a slow
request later. A pattern matches a whole topic name, as Kafka's and Spark's ``subscribePattern`` do.
"""

from __future__ import annotations

import re
from functools import lru_cache

import re2

# What RE2 may spend compiling one pattern (its default is 8 MiB); a 1,000-character pattern of
# nested counted repetitions stays well under it, a larger program is refused.
_MAX_PROGRAM_BYTES = 4 << 20


def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = _MAX_PROGRAM_BYTES
    options.log_errors = False  # a tenant's bad pattern is a 422, not a line in the API's log
    return options


@lru_cache(maxsize=1024)
def compile_topic_pattern(pattern: str) -> re2._Regexp:
    """``pattern`` compiled for RE2; ``ValueError`` saying why RE2 refused it."""
    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        refusal = exc.args[0] if exc.args else "refused"
        if isinstance(refusal, bytes):
            refusal = refusal.decode("utf-8", "replace")
    try:
        re.compile(pattern)  # only compiled, never matched: compiling is linear, matching may not be
    except re.error as exc:
        raise ValueError(f"topic_pattern is not a valid regex: {exc}") from None
    raise ValueError(f"topic_pattern is not a regex that can be matched in linear time (RE2 syntax: no "
                     f"backreferences or lookaround): {refusal}")


def matches_topic(pattern: str, topic: str) -> bool:
    """Whether ``pattern`` (valid: checked when the pipeline was defined) matches all of ``topic``."""
    return compile_topic_pattern(pattern).fullmatch(topic) is not None
