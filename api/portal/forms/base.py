"""What every portal form shares: the base model that turns a form into the API's body and names its
errors as the API does, the confirmation of a delete, and the parsing of times and settings text."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ValidationError

from api.core.errors import Conflict, DomainError, PreconditionFailed, ValidationFailed, validation_errors
from api.portal.views import FormErrors

M = TypeVar("M", bound=BaseModel)


_MINUTE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?\Z")


class FormInvalid(ValidationFailed):
    """A form's own rules refused it before any API schema saw it; ``fields`` is keyed by its inputs."""

    def __init__(self, fields: FormErrors) -> None:
        super().__init__("The form is not complete")
        self.fields = fields


def route_errors(errors: Iterable[Mapping[str, Any]], fields: Mapping[str, str]) -> FormErrors:
    """Problem ``errors`` (``{field, message}``, fields named as the API names them) → form inputs via
    ``fields`` (API field → input; the longest matching prefix wins); the rest belong to no input."""
    out = FormErrors()
    for error in errors:
        name = str(error.get("field", ""))
        message = str(error.get("message", "invalid")).removeprefix("Value error, ")
        best = max((prefix for prefix in fields if name == prefix or name.startswith((prefix + ".", prefix + "["))),
                   key=len, default=None)
        out.add(fields[best] if best is not None else None, message)
    return out


class Parts:
    """An API body validated part by part, its errors named as the API names its fields."""

    def __init__(self) -> None:
        self.errors: list[dict[str, Any]] = []
        self._failed: set[str] = set()

    def check(self, model: type[M], data: Mapping[str, Any], at: str) -> M | None:
        """``data`` as the part ``model`` at field ``at``; None once its errors are noted."""
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            self._failed.add(at)
            for error in validation_errors(exc.errors()):
                error["field"] = f"{at}.{error['field']}" if error["field"] else at
                self.errors.append(error)
            return None

    def refuse(self, at: str, message: str) -> None:
        """Note a form's own refusal of the part at field ``at``, named as the API names it."""
        self._failed.add(at)
        self.errors.append({"field": at, "message": message, "type": "value_error"})

    def whole(self, model: type[M], data: Mapping[str, Any], detail: str) -> M:
        """``data`` (holding the checked parts) as ``model``; ``ValidationFailed`` naming every error."""
        try:
            value = model.model_validate(data)
        except ValidationError as exc:
            for error in validation_errors(exc.errors()):
                # A refused part reaches the whole as None: its own errors are noted already, and the
                # whole's model checks would not have run (pydantic runs them on valid fields only).
                head = re.split(r"[.\[]", error["field"], maxsplit=1)[0]
                if head not in self._failed and not (head == "" and self._failed):
                    self.errors.append(error)
            raise ValidationFailed(detail, errors=self.errors) from None
        if self.errors:
            raise ValidationFailed(detail, errors=self.errors)
        return value


class PortalForm(BaseModel):
    """A form as the browser sends it: its inputs' text, the API field names they stand for, and how
    a refusal is shown beside them."""

    FIELDS: ClassVar[Mapping[str, str]] = {}
    CONFLICT_FIELD: ClassVar[str | None] = None  # the input a 409 concerns (a name already taken)
    NOT_SHOWN_BACK: ClassVar[frozenset[str]] = frozenset()

    def values(self) -> dict[str, Any]:
        """What the form shows again after a refusal."""
        return self.model_dump(by_alias=True, exclude=set(self.NOT_SHOWN_BACK))

    def errors(self, failure: DomainError, fields: Mapping[str, str] | None = None) -> FormErrors:
        """``failure``'s messages beside the inputs they concern, the rest above the form."""
        if isinstance(failure, FormInvalid):
            return failure.fields
        out = route_errors(failure.errors or [], self.FIELDS if fields is None else fields)
        if isinstance(failure, PreconditionFailed):
            out.add(None, "It was changed by someone else after this page was shown, and nothing was done: "
                          "look at it again and retry")
        elif isinstance(failure, Conflict) and self.CONFLICT_FIELD:
            out.add(self.CONFLICT_FIELD, failure.detail)
        elif not out:
            out.add(None, failure.detail)
        return out


def put_unless_default(out: dict[str, Any], key: str, value: Any, default: Any, written: Mapping[str, Any]) -> None:
    """``out[key] = value``, unless ``value`` is the API's default and the definition did not write ``key``."""
    if value != default or key in written:
        out[key] = value


def utc_moment(text: str) -> str | None:
    """A datetime-local input's text (no zone, seconds optional; the forms say UTC) as an aware ISO time."""
    moment = text.strip()
    if not _MINUTE.match(moment):
        return None
    return moment + (":00" if moment.count(":") == 1 else "") + "+00:00"


def utc_input(moment: datetime | None) -> str:
    """A time as a datetime-local input shows it, in UTC."""
    return "" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def option_value(text: str) -> str | int | bool:
    """A client option as the API stores it: true/false and whole numbers typed, the rest text."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return int(text) if re.fullmatch(r"-?\d{1,18}", text) else text


def options_text(options: Mapping[str, str | int | bool]) -> str:
    """Client options as the form's text: one ``name=value`` a line."""
    return "\n".join(f"{name}={str(value).lower() if isinstance(value, bool) else value}"
                     for name, value in sorted(options.items()))


def settings_lines(text: str, parts: Parts, at: str, example: str) -> dict[str, str]:
    """``name=value`` lines (blank lines and ``#`` comments skipped); a malformed line is refused at ``at``."""
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            parts.refuse(at, f"Line {number}: write name=value, such as {example}")
            continue
        out[name.strip()] = value.strip()
    return out


class DeleteForm(PortalForm):
    """A delete's confirmation: the name typed again, and the ETag of what the confirmation page showed
    (a delete of something changed since is refused, as a DELETE with If-Match is)."""

    confirm_name: str = ""
    etag: str = ""

    FIELDS = {"confirm_name": "confirm_name"}

    def check(self, name: str) -> None:
        """``FormInvalid`` unless the name typed is ``name``."""
        if self.confirm_name.strip() != name:
            problems = FormErrors()
            problems.add("confirm_name", f"Type {name} to confirm")
            raise FormInvalid(problems)
