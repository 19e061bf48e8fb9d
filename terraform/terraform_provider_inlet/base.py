"""What every resource and data source shares: its provider, and its name and schema declared as
class attributes."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from tf.schema import Attribute, Schema

if TYPE_CHECKING:
    from terraform_provider_inlet.provider import InletProvider


class Declared:
    name: ClassVar[str]
    attributes: ClassVar[list[Attribute]]
    description: ClassVar[str]
    # Moves when the state's shape changes; ``upgrade`` then brings an older state up to it.
    schema_version: ClassVar[int] = 1

    def __init__(self, provider: InletProvider) -> None:
        self.provider = provider

    @classmethod
    def get_name(cls) -> str:
        return cls.name

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(version=cls.schema_version, attributes=cls.attributes, description=cls.description)
