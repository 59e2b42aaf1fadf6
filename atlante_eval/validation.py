"""Building blocks for the user-written file formats and their diagnostics.

Every format a user writes (project eval section, scenario documents, pack eval
metadata) is a pydantic model built on :class:`StrictModel`: frozen, no unknown
keys, no type coercion. :func:`validation_diagnostics` turns a pydantic
``ValidationError`` into one diagnostic per problem, each with a JSON pointer and
the line and column of the offending value.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from .diagnostics import Diagnostic, Location, error
from .jsondoc import locate_pointers, pointer_from_loc
from .paths import sandbox_path_problem

__all__ = [
    "CHECK_TAGS",
    "NonEmptyStr",
    "Regex",
    "SandboxPath",
    "StrictModel",
    "validation_diagnostics",
]


class StrictModel(BaseModel):
    """Base of every user-written format: frozen, strict, camelCase keys, no extras."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
    )


NonEmptyStr = Annotated[str, Field(min_length=1)]


def _check_sandbox_path(value: str) -> str:
    problem = sandbox_path_problem(value)
    if problem:
        raise ValueError(f"path {problem}")
    return value


def _check_regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"must be a valid regular expression (Python re): {exc}") from None
    return value


#: A safe, root- or sandbox-relative path (see :func:`paths.sandbox_path_problem`).
SandboxPath = Annotated[str, Field(min_length=1), AfterValidator(_check_sandbox_path)]
#: A non-empty regular expression that compiles with Python's ``re``.
Regex = Annotated[str, Field(min_length=1), AfterValidator(_check_regex)]

#: Discriminator values of the check union; pydantic puts them in error locations.
CHECK_TAGS = frozenset(
    {"command", "file-exists", "file-absent", "file-unchanged", "file-contains", "diff-allowlist"}
)


def _clean_loc(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """Drop the union tags pydantic inserts after a list index (e.g. ``checks/0/command``)."""
    cleaned: list[str | int] = []
    for index, part in enumerate(loc):
        previous = loc[index - 1] if index else None
        if isinstance(previous, int) and isinstance(part, str) and part in CHECK_TAGS:
            continue
        if isinstance(part, str) and (part.startswith("function-") or part in {"str", "int"}):
            continue
        cleaned.append(part)
    return tuple(cleaned)


def _message(detail: dict[str, Any], loc: tuple[str | int, ...]) -> str:
    kind = detail["type"]
    key = loc[-1] if loc else ""
    if kind == "extra_forbidden":
        return f'unrecognized property "{key}"'
    if kind == "missing":
        return f'missing required property "{key}"'
    if kind == "union_tag_invalid":
        tag = detail.get("ctx", {}).get("tag", "")
        expected = detail.get("ctx", {}).get("expected_tags", "")
        return f'unknown check type "{tag}"; expected one of {expected}'
    if kind == "union_tag_not_found":
        return 'missing required property "type"'
    message = str(detail["msg"])
    message = message.removeprefix("Value error, ")
    if kind == "literal_error":
        message = message.replace("Input should be", "must be")
    return message


def validation_diagnostics(
    exc: ValidationError,
    *,
    code: str,
    source: str | None,
    text: str | None,
    base_pointer: tuple[str | int, ...] = (),
    next_step: str | None = None,
) -> list[Diagnostic]:
    """Convert a pydantic error into diagnostics with pointers and positions.

    Args:
        exc: the validation error.
        code: diagnostic code for every problem (e.g. ``invalid-eval-scenario``).
        source: the file shown to the user.
        text: the file's text, used to find line and column of each pointer.
        base_pointer: path of the validated value inside the document.
        next_step: the ``next`` hint for every diagnostic.
    """
    positions = locate_pointers(text) if text is not None else {}
    diagnostics: list[Diagnostic] = []
    for detail in exc.errors(include_url=False):
        loc = _clean_loc(tuple(detail["loc"]))
        full = (*base_pointer, *loc)
        pointer = pointer_from_loc(full)
        position = _nearest_position(positions, full)
        diagnostics.append(
            error(
                code,
                _message(detail, loc),
                source=source,
                pointer=pointer or None,
                location=Location(line=position[0], column=position[1]) if position else None,
                next=next_step,
            )
        )
    return diagnostics


def _nearest_position(
    positions: dict[str, tuple[int, int]], loc: tuple[str | int, ...]
) -> tuple[int, int] | None:
    for end in range(len(loc), -1, -1):
        found = positions.get(pointer_from_loc(loc[:end]))
        if found:
            return found
    return None
