"""The portal's forms, a module per domain as its pages are (``base`` holds what they share): one
pydantic model each, read with FastAPI's ``Form()`` (the pipeline list's filters, the offset lookup and
the history's page with ``Query()``), and how each becomes the body the API itself takes.

A form model holds the text the browser sent, so reading one never fails: a refusal is shown on the
form's page, never as a JSON 422. Turning a form into the API's schema (``spec()``, ``to_patch()``)
raises ``ValidationFailed`` whose errors name fields as the API names them (``source.topics``,
``schedule.cron``). Where the API schema has a union (a schedule, credentials, a target), the form has
already chosen the member and validates that member on its own, so no error is ever named after
pydantic's label for a union member. Each form's ``FIELDS`` maps those API names, which the services'
own errors use too, to the form's inputs; rules of a form itself (choose a partition, enter a time)
raise ``FormInvalid``, keyed by the inputs directly. The CSRF token every form carries is checked by
``auth`` before a page reads its form (the sign-in form's, which has no session yet, excepted).

A form that changes or deletes something saved carries the ``etag`` of what its page showed, sent
as the API's If-Match: a change made by someone else in between is refused (412), never overwritten.
"""

from api.portal.forms.base import DeleteForm, FormInvalid
from api.portal.forms.connections import ConnectionForm, RotationForm
from api.portal.forms.keys import ApiKeyForm, LoginForm, RevokeForm
from api.portal.forms.offsets import OffsetsQuery, ReplayForm
from api.portal.forms.pipelines import PipelineFilters, PipelineForm
from api.portal.forms.quarantine import ReprocessForm

__all__ = [
    "ApiKeyForm", "ConnectionForm", "DeleteForm", "FormInvalid", "LoginForm", "OffsetsQuery", "PipelineFilters",
    "PipelineForm", "ReplayForm", "ReprocessForm", "RevokeForm", "RotationForm",
]
