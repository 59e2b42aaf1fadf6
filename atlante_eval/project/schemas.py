"""JSON Schemas generated from the pydantic models, for editors and other tools."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from .._util.fielddocs import document_fields
from ..choices import SCHEMA_KINDS
from .config import ProjectDocument
from .scenarios import (
    EXTENDED_SCENARIO_SCHEMA_URI,
    SCENARIO_SCHEMA_URI,
    ExtendedScenarioDocument,
    ScenarioDocument,
)

__all__ = ["SCHEMA_KINDS", "json_schema"]


def _transcript_schema() -> dict[str, Any]:
    from pydantic import TypeAdapter

    from .._util.fielddocs import _models_in
    from ..transcript import TranscriptEntry

    document_fields(*_models_in(TranscriptEntry))
    schema = TypeAdapter(TranscriptEntry).json_schema(by_alias=True, mode="validation")
    schema["title"] = "TranscriptEntry"
    schema["description"] = (
        "One line of a trial's transcript.jsonl (docs/transcripts.md); the first line "
        "is always a header."
    )
    return schema


def _model(kind: str) -> type[BaseModel]:
    if kind == "scenario":
        return ScenarioDocument
    if kind == "config":
        return ProjectDocument
    from ..report import RunReport

    return RunReport


def json_schema(kind: str, *, extended: bool = False) -> dict[str, Any]:
    """Return the JSON Schema (draft 2020-12) of ``kind`` (one of :data:`SCHEMA_KINDS`).

    ``extended`` (scenario only) returns atlante-eval's own scenario schema: everything
    v0.1 admits plus the behaviour checks; its ``$id`` is the ``$schema`` such documents
    declare.
    """
    if kind == "scenario" and extended:
        schema = ExtendedScenarioDocument.model_json_schema(by_alias=True, mode="validation")
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            **schema,
            "$id": EXTENDED_SCENARIO_SCHEMA_URI,
        }
    if kind == "transcript":
        schema = _transcript_schema()
    else:
        model = _model(kind)
        document_fields(model)
        schema = model.model_json_schema(by_alias=True, mode="validation")
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
    if kind == "scenario":
        schema["$id"] = SCENARIO_SCHEMA_URI
    if kind == "config":
        schema["additionalProperties"] = True
        schema["description"] = (
            "The parts of atlante.jsonc that atlante-eval reads; other keys belong to "
            "atlante build."
        )
    return schema
