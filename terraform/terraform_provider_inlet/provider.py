"""The ``inlet`` provider: where Inlet is and which API key to use."""

from __future__ import annotations

import os
from typing import Any

from tf.iface import Config, DataSource, Provider, Resource
from tf.schema import Attribute, Schema
from tf.types import Number, String
from tf.utils import Diagnostics

from terraform_provider_inlet.client import InletClient

ADDRESS = "inlet.dev/inlet/inlet"
VERSION = "0.1.0"


class InletProvider(Provider):
    def __init__(self) -> None:
        self._client: InletClient | None = None

    @property
    def client(self) -> InletClient:
        if self._client is None:
            raise RuntimeError("the provider was not configured")
        return self._client

    def get_model_prefix(self) -> str:
        return "inlet_"

    def full_name(self) -> str:
        return ADDRESS

    def get_provider_schema(self, diags: Diagnostics) -> Schema:
        return Schema(attributes=[
            Attribute("endpoint", String(), optional=True,
                      description="Inlet's base URL, e.g. https://inlet.example.com (default: $INLET_ENDPOINT)"),
            Attribute("api_key", String(), optional=True, sensitive=True,
                      description="A tenant API key (default: $INLET_API_KEY); inlet_api_key needs the admin role"),
            Attribute("timeout_seconds", Number(), optional=True,
                      description="Time allowed for one request to Inlet (default 30)"),
        ])

    def validate_config(self, diags: Diagnostics, config: Config) -> None:
        timeout = config.get("timeout_seconds")
        if isinstance(timeout, (int, float)) and timeout <= 0:
            diags.add_error("timeout_seconds must be positive", path=["timeout_seconds"])

    def configure_provider(self, diags: Diagnostics, config: Config) -> None:
        endpoint = _setting(config, "endpoint", "INLET_ENDPOINT")
        api_key = _setting(config, "api_key", "INLET_API_KEY")
        if not endpoint:
            diags.add_error("Inlet's endpoint is not set", "Set endpoint in the provider block or INLET_ENDPOINT.",
                            path=["endpoint"])
        if not api_key:
            diags.add_error("No Inlet API key", "Set api_key in the provider block or INLET_API_KEY.",
                            path=["api_key"])
        if endpoint and api_key:
            self._client = InletClient(endpoint, api_key, timeout_s=float(config.get("timeout_seconds") or 30))

    def get_resources(self) -> list[type[Resource]]:
        from terraform_provider_inlet.resources.api_key import ApiKeyResource
        from terraform_provider_inlet.resources.connection import ConnectionResource
        from terraform_provider_inlet.resources.pipeline import PipelineResource
        from terraform_provider_inlet.resources.pipeline_offsets import PipelineOffsetsResource

        return [ConnectionResource, PipelineResource, PipelineOffsetsResource, ApiKeyResource]

    def get_data_sources(self) -> list[type[DataSource]]:
        from terraform_provider_inlet.data_sources import (
            ConnectionDataSource,
            PipelineDataSource,
            PipelineOffsetsDataSource,
            UsageDataSource,
        )

        return [ConnectionDataSource, PipelineDataSource, PipelineOffsetsDataSource, UsageDataSource]


def _setting(config: Config, name: str, env: str) -> str | None:
    value: Any = config.get(name)
    return value if isinstance(value, str) and value else os.environ.get(env) or None
