"""The base of every JSON document this tool writes."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["OutputModel"]


class OutputModel(BaseModel):
    """Base of every JSON document this tool writes: frozen, camelCase keys, no extras."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        ser_json_inf_nan="null",
        defer_build=True,
    )
    __field_docs__: ClassVar[bool] = True
    """Field docstrings are read when a JSON Schema is generated (:mod:`.fielddocs`)."""
