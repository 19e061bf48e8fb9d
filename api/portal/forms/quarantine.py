"""The quarantine's reprocess form: a Kafka time window (UTC), and whether to count or to land."""

from __future__ import annotations

from pydantic import ValidationError

from api.core.errors import ValidationFailed
from api.portal.forms.base import FormInvalid, PortalForm, utc_moment
from api.portal.views import FormErrors
from api.quarantine.schemas import ReprocessRequest


class ReprocessForm(PortalForm):
    """``since`` and ``until`` as datetime-local inputs (UTC; either may be empty), and the button pressed:
    ``count`` (a dry run) or ``land``."""

    since: str = ""
    until: str = ""
    action: str = "count"

    FIELDS = {"since": "since", "until": "until"}

    def spec(self) -> ReprocessRequest:
        moments: dict[str, str | None] = {}
        problems = FormErrors()
        for name in ("since", "until"):
            text = getattr(self, name).strip()
            moments[name] = utc_moment(text) if text else None
            if text and moments[name] is None:
                problems.add(name, "Enter a date and time, such as 2026-12-07T09:30")
        if problems:
            raise FormInvalid(problems)
        try:
            return ReprocessRequest.model_validate({**moments, "dry_run": self.action != "land"})
        except ValidationError as exc:
            raise ValidationFailed.of(exc, "The reprocess is not valid") from None
