"""Attach attribute docstrings to pydantic fields when a JSON Schema needs them.

The models document each field with a docstring under it. Pydantic's
``use_attribute_docstrings`` reads them while every class is created, which
re-reads and parses each class's source at import: about a tenth of the CLI's
start-up, for text only a JSON Schema shows. Instead, :func:`document_fields`
reads them the first time a schema is generated, sets them as the fields'
descriptions exactly as pydantic would (a field's own docstring, or the one it
inherits with the field; an explicit ``description`` wins), and rebuilds the
models, each after the models it refers to, so the schema is the same. Only
models whose class sets ``__field_docs__ = True`` (the bases of this package's
formats) read their own docstrings, as only those set ``use_attribute_docstrings``.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
import threading
import typing
from collections.abc import Iterator

from pydantic import BaseModel

__all__ = ["document_fields", "field_docstrings"]

_lock = threading.Lock()
_documented: set[type[BaseModel]] = set()


def field_docstrings(cls: type) -> dict[str, str]:
    """Return the docstrings written under the annotated attributes of ``cls``'s own body."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.ClassDef):
        return {}
    docs: dict[str, str] = {}
    body = node.body
    for statement, following in itertools.pairwise(body):
        if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
            continue
        if (
            isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = inspect.cleandoc(following.value.value)
    return docs


def _models_in(annotation: object) -> Iterator[type[BaseModel]]:
    """Yield the model classes an annotation refers to (through unions, lists, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for argument in typing.get_args(annotation):
        yield from _models_in(argument)


def _document(cls: type[BaseModel], visiting: set[type[BaseModel]]) -> None:
    if cls in _documented or cls in visiting:
        return
    visiting.add(cls)
    for base in cls.__mro__[1:]:
        if isinstance(base, type) and issubclass(base, BaseModel) and base is not BaseModel:
            _document(base, visiting)
    for info in cls.model_fields.values():
        for model in _models_in(info.annotation):
            _document(model, visiting)
    own = field_docstrings(cls) if getattr(cls, "__field_docs__", False) else {}
    annotated = set(inspect.get_annotations(cls))
    for name, info in cls.model_fields.items():
        if info.description is not None:
            continue
        if name in annotated:
            doc = own.get(name)
        else:  # inherited unchanged: pydantic copies the base's field, docstring included
            doc = next(
                (
                    inherited.description
                    for base in cls.__mro__[1:]
                    if isinstance(base, type)
                    and issubclass(base, BaseModel)
                    and (inherited := base.model_fields.get(name)) is not None
                    and inherited.description is not None
                ),
                None,
            )
        if doc is not None:
            info.description = doc
    cls.model_rebuild(force=True)
    _documented.add(cls)


def document_fields(*models: type[BaseModel]) -> None:
    """Give the fields of ``models`` and every model they refer to their docstrings.

    Idempotent and thread-safe; each model is rebuilt once, after the models its
    fields refer to, so schemas embedding them carry the descriptions too.
    """
    with _lock:
        visiting: set[type[BaseModel]] = set()
        for model in models:
            _document(model, visiting)
