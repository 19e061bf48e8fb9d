"""Signing in, and the API-key forms: a new key, a revocation."""

from __future__ import annotations

from pydantic import BaseModel, ValidationError

from api.core.errors import ValidationFailed
from api.portal.forms.base import PortalForm
from api.tenancy.schemas import ApiKeyCreate


class LoginForm(BaseModel):
    """The sign-in form. It has no session yet: its CSRF token is the pre-session cookie's, checked here."""

    api_key: str = ""
    csrf_token: str = ""
    next: str = ""


class ApiKeyForm(PortalForm):
    """The new-API-key form: a name and a role, as ``POST /api-keys`` takes them."""

    name: str = ""
    role: str = ""

    FIELDS = {"name": "name", "role": "role"}

    @classmethod
    def initial(cls) -> ApiKeyForm:
        return cls(role="viewer")

    def spec(self) -> ApiKeyCreate:
        try:
            return ApiKeyCreate.model_validate({"name": self.name.strip(), "role": self.role.strip()})
        except ValidationError as exc:
            raise ValidationFailed.of(exc, "The API key is not valid") from None


class RevokeForm(BaseModel):
    """An API key's revocation: the ETag of the key as the list showed it."""

    etag: str = ""
