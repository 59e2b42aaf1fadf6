"""Building blocks for the user-written file formats and their diagnostics.

Every format a user writes (project eval section, scenario documents, pack eval
metadata) is a pydantic model built on :class:`StrictModel`: frozen, no unknown
keys, no type coercion. :func:`validation_diagnostics` turns a pydantic
``ValidationError`` into one diagnostic per problem, each with a JSON pointer and
the line and column of the offending value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from .._util.jsondoc import locate_pointers, pointer_from_loc
from .._util.paths import sandbox_path_problem
from .._util.patterns import pattern_problem
from ..choices import BehaviourCheckType, CheckType
from ..diagnostics import Diagnostic, Location, error

__all__ = [
    "BEHAVIOUR_CHECK_TAGS",
    "CHECK_TAGS",
    "CheckModel",
    "NonEmptyStr",
    "Regex",
    "SandboxPath",
    "StrictModel",
    "check_regex",
    "location_of",
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
    )
    __field_docs__: ClassVar[bool] = True
    """Field docstrings are read when a JSON Schema is generated (:mod:`.fielddocs`)."""


class CheckModel(StrictModel):
    """Base of every check type's scenario model."""

    def patterns(self) -> list[tuple[str, str]]:
        """The regular expressions this check holds, as ``(key, pattern)`` pairs.

        Validation warns about each one that may backtrack for long; a check type
        with a regular-expression field returns it here (none by default).
        """
        return []


NonEmptyStr = Annotated[str, Field(min_length=1)]


def _check_sandbox_path(value: str) -> str:
    problem = sandbox_path_problem(value)
    if problem:
        raise ValueError(f"path {json.dumps(value, ensure_ascii=False)} {problem}")
    return value


def _check_regex(value: str) -> str:
    problem = pattern_problem(value)
    if problem is not None:
        raise ValueError(f"must be a valid regular expression (Python re): {problem}")
    return value


#: A safe, root- or sandbox-relative path (see :func:`paths.sandbox_path_problem`).
SandboxPath = Annotated[str, Field(min_length=1), AfterValidator(_check_sandbox_path)]
#: A non-empty regular expression that compiles with Python's ``re``.
Regex = Annotated[str, Field(min_length=1), AfterValidator(_check_regex)]

#: Discriminator values of the check union; pydantic puts them in error locations.
CHECK_TAGS: frozenset[str] = frozenset(get_args(CheckType))
#: The behaviour check types (the atlante-eval extension a v0.1 document may not use).
BEHAVIOUR_CHECK_TAGS: frozenset[str] = frozenset(get_args(BehaviourCheckType))


_NO_VALUE = object()
_GOT = re.compile(r" \(got .*\)$")
_SCALARS = (str, int, float, bool)


def _is_union_tag(part: str) -> bool:
    """Whether ``part`` is a pydantic union-member or validator tag, not a document key."""
    return (
        part.startswith(("function-", "constrained-", "literal["))
        or "[" in part
        or part in {"str", "int", "bool", "float", "list", "dict", "none"}
    )


_Loc = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class _Problem:
    loc: _Loc
    message: str
    union_at: _Loc | None
    """Where the innermost-first union sits, when the error is inside a union member."""
    member: str | None
    """The union member (pydantic's tag) the error belongs to."""
    mismatch: bool
    """The member rejected the union value's type itself (e.g. not a string)."""


def _clean_loc(
    loc: _Loc, value: object = _NO_VALUE, *, missing: bool = False
) -> tuple[_Loc, _Loc | None, str | None]:
    """Drop the tags pydantic inserts into an error location.

    Walks ``value`` (the validated input) along ``loc``: a part that indexes the
    current value is a real key or index; a check type after a list index
    (``checks/0/command``) and a union-member tag (``extends/list[...]``) are not.

    Returns:
        The cleaned location, the location of the first union whose member tag was
        dropped, and that tag (both ``None`` outside unions).
    """
    cleaned: list[str | int] = []
    union_at: _Loc | None = None
    member: str | None = None
    current = value
    for index, part in enumerate(loc):
        last = index == len(loc) - 1
        if isinstance(part, str):
            after_index = bool(cleaned) and isinstance(cleaned[-1], int)
            if (
                after_index
                and part in CHECK_TAGS
                and (not isinstance(current, dict) or current.get("type") == part)
            ):
                continue
            if isinstance(current, dict) and part in current:
                cleaned.append(part)
                current = current[part]
                continue
            if not (last and missing) and _is_union_tag(part):
                if union_at is None:
                    union_at, member = tuple(cleaned), part
                continue
        elif isinstance(current, list) and 0 <= part < len(current):
            cleaned.append(part)
            current = current[part]
            continue
        cleaned.append(part)
        current = _NO_VALUE
    return tuple(cleaned), union_at, member


def _subject(loc: tuple[str | int, ...]) -> str:
    """Name the value at ``loc`` for a message: ``"trials"`` or ``"allow" item 1``."""
    if not loc:
        return "the document"
    last = loc[-1]
    if isinstance(last, int):
        owner = next((p for p in reversed(loc) if isinstance(p, str)), None)
        return f'"{owner}" item {last}' if owner else f"item {last}"
    return f'"{last}"'


def _got(detail: Mapping[str, Any]) -> str:
    value = detail.get("input")
    if isinstance(value, _SCALARS) and len(repr(value)) <= 60:
        return f" (got {json.dumps(value, ensure_ascii=False)})"
    return ""


def _message(detail: Mapping[str, Any], loc: tuple[str | int, ...]) -> str:
    kind = detail["type"]
    ctx = detail.get("ctx") or {}
    key = loc[-1] if loc else ""
    if kind == "extra_forbidden":
        return f'unrecognized property "{key}"'
    if kind == "missing":
        return f'missing required property "{key}"'
    if kind == "union_tag_invalid":
        expected = ctx.get("expected_tags", "")
        return f'unknown check type "{ctx.get("tag", "")}"; expected one of {expected}'
    if kind == "union_tag_not_found":
        return 'missing required property "type"'
    subject = _subject(loc)
    if kind == "string_pattern_mismatch":
        return f"{subject} must match the pattern {ctx.get('pattern')}{_got(detail)}"
    if kind == "string_too_short":
        return f"{subject} must not be empty"
    if kind == "too_short":
        count = ctx.get("min_length", 1)
        return f"{subject} must have at least {count} item{'s' if count != 1 else ''}"
    message = str(detail["msg"]).removeprefix("Value error, ")
    if message.startswith("Input should be "):
        return f"{subject} must be {message.removeprefix('Input should be ')}{_got(detail)}"
    if kind == "value_error" and message.startswith("must "):
        return f"{subject} {message}"
    if kind == "value_error" or not loc:
        return message
    return f"{subject}: {message}"


def validation_diagnostics(
    exc: ValidationError,
    *,
    code: str,
    source: str | None,
    text: str | None,
    base_pointer: tuple[str | int, ...] = (),
    next_step: str | None = None,
    value: object = _NO_VALUE,
) -> list[Diagnostic]:
    """Convert a pydantic error into diagnostics with pointers and positions.

    Args:
        exc: the validation error.
        code: diagnostic code for every problem (e.g. ``invalid-eval-scenario``).
        source: the file shown to the user.
        text: the file's text, used to find line and column of each pointer.
        base_pointer: path of the validated value inside the document.
        next_step: the ``next`` hint for every diagnostic.
        value: the validated input; when given, pointers are exact even inside
            unions (otherwise union tags are recognised by their shape).
    """
    positions = locate_pointers(text) if text is not None else {}
    problems: list[_Problem] = []
    for detail in exc.errors(include_url=False):
        kind = str(detail["type"])
        loc, union_at, member = _clean_loc(tuple(detail["loc"]), value, missing=kind == "missing")
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            loc = (*loc, "type")
        problems.append(
            _Problem(
                loc=loc,
                message=_message(detail, loc),
                union_at=union_at,
                member=member,
                mismatch=loc == union_at and kind.endswith("_type"),
            )
        )
    diagnostics: list[Diagnostic] = []
    seen: set[tuple[str, str]] = set()
    for loc, message in _merge_union_branches(problems):
        full = (*base_pointer, *loc)
        pointer = pointer_from_loc(full)
        if (pointer, message) in seen:
            continue
        seen.add((pointer, message))
        position = _nearest_position(positions, full)
        diagnostics.append(
            error(
                code,
                message,
                source=source,
                pointer=pointer or None,
                location=Location(line=position[0], column=position[1]) if position else None,
                next=next_step,
            )
        )
    return diagnostics


def _merge_union_branches(problems: list[_Problem]) -> list[tuple[_Loc, str]]:
    """Report the problems of the union member the user meant, not of every member.

    A member that failed on something other than the value's own type (say, an
    empty string inside the array branch of ``string | array``) is the intended
    one, and all of its problems are kept. When every member rejected the value's
    type, one message joins the expected types with "or".
    """
    unions: dict[_Loc, list[_Problem]] = {}
    result: list[tuple[_Loc, str]] = []
    for problem in problems:
        if problem.union_at is None:
            result.append((problem.loc, problem.message))
        else:
            unions.setdefault(problem.union_at, []).append(problem)
    for union_at, members in unions.items():
        meant = {p.member for p in members if not p.mismatch}
        if meant:
            result.extend((p.loc, p.message) for p in members if p.member in meant)
            continue
        subject = _subject(union_at)
        got = _GOT.search(members[0].message)
        kinds = [_GOT.sub("", p.message).removeprefix(f"{subject} must be ") for p in members]
        joined = " or ".join(dict.fromkeys(kinds))
        result.append((union_at, f"{subject} must be {joined}{got.group() if got else ''}"))
    return result


def location_of(text: str, pointer: str) -> Location | None:
    """Return the line and column of ``pointer`` in the JSON/JSONC ``text``, if it is there."""
    position = locate_pointers(text).get(pointer) if text else None
    return Location(line=position[0], column=position[1]) if position else None


def _nearest_position(
    positions: dict[str, tuple[int, int]], loc: tuple[str | int, ...]
) -> tuple[int, int] | None:
    for end in range(len(loc), -1, -1):
        found = positions.get(pointer_from_loc(loc[:end]))
        if found:
            return found
    return None


def check_regex(value: str) -> str:
    """Return ``value`` when it is a pattern :data:`Regex` accepts; raise ``ValueError`` if not."""
    return _check_regex(value)
