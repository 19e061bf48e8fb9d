"""The OpenAPI document as committed in ``openapi.yaml``: generated from the app, never hand-edited.

Refresh it with ``.venv/bin/inlet openapi --write openapi.yaml``.
"""

from __future__ import annotations

import yaml

from api.core.config import Settings
from api.main import create_app


def render_openapi() -> str:
    app = create_app(Settings(database_url="sqlite://"))
    return yaml.safe_dump(app.openapi(), sort_keys=False, allow_unicode=True, width=120)
