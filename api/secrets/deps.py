"""The request dependency that hands a route the process's secret store."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from api.secrets.store import SecretStore


def _secrets(request: Request) -> SecretStore:
    store: SecretStore = request.app.state.secrets
    return store


SecretsDep = Annotated[SecretStore, Depends(_secrets)]
