"""docs/report.md stays in step with the report models."""

from __future__ import annotations

import json
import re
from pathlib import Path

from atlante_eval import RunReport
from atlante_eval.project.schemas import json_schema

DOC = Path(__file__).resolve().parent.parent / "docs" / "report.md"


def _schema_block() -> object:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(r"<summary>The report schema</summary>\n\n```json\n(.*?)\n```", text, re.S)
    assert match is not None
    return json.loads(match.group(1))


def test_documented_schema_is_the_command_output() -> None:
    """The schema in docs/report.md equals `atlante-eval schema report`."""
    assert _schema_block() == json_schema("report")


def test_every_report_field_is_documented() -> None:
    """Every JSON field name of every report model appears in docs/report.md."""
    prose = DOC.read_text(encoding="utf-8").split("## JSON Schema")[0]
    prose = re.sub(r"```.*?```", "", prose, flags=re.S)
    text = " ".join(re.findall(r"`([^`]+)`", prose))
    missing = []
    stack: list[type] = [RunReport]
    seen: set[type] = set()
    while stack:
        model = stack.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():  # type: ignore[attr-defined]
            alias = field.alias or name
            if not re.search(rf"\b{re.escape(alias)}\b", text):
                missing.append(f"{model.__name__}.{alias}")
            for candidate in _models(field.annotation):
                stack.append(candidate)
    assert missing == []


def _models(annotation: object) -> list[type]:
    from pydantic import BaseModel

    found: list[type] = []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        found.append(annotation)
    for arg in getattr(annotation, "__args__", ()):
        found.extend(_models(arg))
    return found
