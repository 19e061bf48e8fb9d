"""The offsets forms: a replay in every mode the API moves offsets, and the offsets page's lookup."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from api.core.errors import DomainError, ValidationFailed
from api.offsets.schemas import MAX_OFFSET, OffsetsPatch, PartitionOffsetRead
from api.pipelines.schemas import TOPIC_PATTERN
from api.portal.forms.base import FormInvalid, PortalForm, utc_moment
from api.portal.views import FormErrors

# Every way the API moves offsets: explicit offsets, a reset (earliest, latest), a time, a duration back
# from now, a shift, and back to the pipeline's starting offsets (the API's DELETE of the offsets).
_REPLAY_MODES = ("offset", "earliest", "latest", "timestamp", "duration", "shift", "starting")


def _offset_input(topic: str, partition: int) -> str:
    return f"offset:{topic}|{partition}"


class ReplayForm(PortalForm):
    """The replay form: the partitions chosen (``tp``, "topic|partition"), where to move them, and on
    the confirmation step the previewed change itself (``patch``, ``etag``, ``action=apply``).

    The change is an ``OffsetsPatch``, or None for the ``starting`` mode: every partition back to the
    pipeline's starting offsets, which the API does as ``DELETE /pipelines/{id}/offsets``."""

    # Extra inputs are kept: one "offset:<topic>|<partition>" per partition of the pipeline.
    model_config = ConfigDict(extra="allow")

    tp: list[str] = []
    mode: str = ""
    replay_mode: str = "append"
    clamp: str = ""
    timestamp: str = ""
    duration: str = ""
    shift: str = ""
    action: str = ""
    patch: str = ""
    etag: str = ""

    FIELDS = {
        "offsets": "partitions", "topics": "partitions", "partitions": "partitions", "to_timestamp": "timestamp",
        "by_duration": "duration", "shift_by": "shift", "replay_mode": "replay_mode", "reset": "mode",
        "clamp": "clamp",
    }

    @classmethod
    def initial(cls) -> ReplayForm:
        return cls(mode="earliest", replay_mode="append")

    @property
    def applies(self) -> bool:
        """The confirmation step: apply the change previewed before."""
        return self.action == "apply"

    @property
    def dry_run(self) -> bool:
        return not self.applies

    @property
    def if_match(self) -> str | None:
        """The offsets' ETag the preview saw: applying fails if they moved since."""
        return self.etag if self.applies else None

    def values(self) -> dict[str, Any]:
        shown = self.model_dump(exclude={"tp", "patch", "etag", "action"})
        shown.pop("csrf_token", None)
        return shown

    def chosen(self) -> list[tuple[str, int]]:
        out = []
        for raw in self.tp:
            topic, sep, partition = raw.rpartition("|")
            if sep and topic and partition.isdigit():
                out.append((topic, int(partition)))
        return sorted(set(out))

    def offset(self, topic: str, partition: int) -> str:
        value = (self.model_extra or {}).get(_offset_input(topic, partition), "")
        return str(value[-1] if isinstance(value, list) else value).strip()

    def to_patch(self) -> OffsetsPatch | None:
        """The change the form asks for: a dry run, or on the confirmation step the previewed change;
        None: back to the starting offsets (``dry_run`` says which step)."""
        body, problems = self._requested()
        if problems:
            raise FormInvalid(problems)
        if body is None:
            return None
        try:
            return OffsetsPatch.model_validate(body)
        except ValidationError as exc:
            raise ValidationFailed.of(exc, "The offsets change is not valid") from None

    @staticmethod
    def confirmation(patch: OffsetsPatch | None) -> str:
        """The previewed change, for the confirmation step's hidden input ("null": the starting offsets)."""
        if patch is None:
            return "null"
        return json.dumps(patch.model_dump(mode="json", exclude={"dry_run"}, exclude_none=True))

    def errors_beside(self, failure: DomainError, partitions: Iterable[PartitionOffsetRead]) -> FormErrors:
        """``errors`` with each partition's offset input known: the services name a partition
        ``offsets.<topic>[<partition>]``, the schema an entry of the change ``offsets[<i>]``."""
        fields = dict(self.FIELDS)
        fields.update({f"offsets.{p.topic}[{p.partition}]": _offset_input(p.topic, p.partition) for p in partitions})
        body, _ = self._requested()
        entries = (body or {}).get("offsets")
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            if isinstance(entry, dict):
                fields[f"offsets[{i}]"] = _offset_input(str(entry.get("topic")), entry.get("partition", ""))
        return self.errors(failure, fields)

    def _requested(self) -> tuple[dict[str, Any] | None, FormErrors]:
        """The OffsetsPatch body the form asks for (None: back to the starting offsets), and the
        problems of the form itself."""
        problems = FormErrors()
        if self.applies:
            try:
                confirmed = json.loads(self.patch)
            except ValueError:
                confirmed = []
            if confirmed is None:
                return None, problems
            if not isinstance(confirmed, dict):
                problems.add(None, "The change to apply could not be read; preview it again")
                return {}, problems
            return {**confirmed, "dry_run": False}, problems
        if self.mode == "starting":
            if self.replay_mode == "replace":
                problems.add("replay_mode", "Back to the starting offsets, records read again are appended: "
                                            "choose append")
            return None, problems
        chosen = self.chosen()
        if not chosen:
            problems.add("partitions", "Choose at least one partition")
        body: dict[str, Any] = {"replay_mode": self.replay_mode, "clamp": self.clamp == "on", "dry_run": True}
        if self.mode not in _REPLAY_MODES:
            problems.add("mode", "Choose how to move the offsets")
        elif self.mode == "offset":
            body["offsets"] = []
            for topic, partition in chosen:
                offset = self.offset(topic, partition)
                if not offset:
                    problems.add(_offset_input(topic, partition), "Enter the offset to move to")
                body["offsets"].append({"topic": topic, "partition": partition, "offset": offset or None})
        else:
            self._scope(chosen, body, problems)
            self._move(body, problems)
        return body, problems

    @staticmethod
    def _scope(chosen: list[tuple[str, int]], body: dict[str, Any], problems: FormErrors) -> None:
        by_topic: dict[str, set[int]] = {}
        for topic, partition in chosen:
            by_topic.setdefault(topic, set()).add(partition)
        # A mode's scope is topics × partitions: every topic must name the same partitions.
        if len({frozenset(p) for p in by_topic.values()}) > 1:
            problems.add("partitions", "For this mode choose the same partition numbers in every topic (or one "
                                       "topic at a time); the offset mode can name any partitions")
        if chosen:
            body["topics"] = sorted(by_topic)
            body["partitions"] = sorted(next(iter(by_topic.values())))

    def _move(self, body: dict[str, Any], problems: FormErrors) -> None:
        if self.mode in ("earliest", "latest"):
            body["reset"] = self.mode
        elif self.mode == "timestamp":
            moment = utc_moment(self.timestamp)
            if moment is None:
                problems.add("timestamp", "Enter a date and time (UTC)")
            else:
                body["to_timestamp"] = moment
        elif self.mode == "duration":
            if not self.duration.strip():
                problems.add("duration", "Enter how far back, such as PT1H (an hour) or P1D (a day)")
            else:
                body["by_duration"] = self.duration.strip().upper()
        else:
            shift = self.shift.strip()
            if not re.fullmatch(r"-?\d+", shift):
                problems.add("shift", "Enter a whole number of offsets, negative to go back")
            else:
                body["shift_by"] = shift


class OffsetsQuery(BaseModel):
    """The offsets page's GET parameters: the "which run wrote this offset" question (a partition of the
    pipeline and an offset) and the history's page number."""

    topic: str = ""
    partition: str = ""
    offset: str = ""
    page: str = "1"

    @property
    def asked(self) -> bool:
        return bool(self.topic or self.partition or self.offset)

    @property
    def number(self) -> int:
        """The history's page; anything unexpected means the first."""
        return int(self.page) if self.page.isdigit() and 0 < int(self.page) < 10_000 else 1

    def question(self) -> tuple[str, int, int]:
        """(topic, partition, offset) as the lookup takes them; ``FormInvalid`` naming each input that is not."""
        problems = FormErrors()
        topic = self.topic.strip()
        if not re.fullmatch(TOPIC_PATTERN, topic):
            problems.add("topic", "Choose a topic")
        partition, offset = self.partition.strip(), self.offset.strip()
        if not partition.isdigit() or int(partition) > 1_000_000:
            problems.add("partition", "Enter a partition number (0, 1, …)")
        if not offset.isdigit() or int(offset) > MAX_OFFSET:
            problems.add("offset", "Enter an offset (0 or more)")
        if problems:
            raise FormInvalid(problems)
        return topic, int(partition), int(offset)
