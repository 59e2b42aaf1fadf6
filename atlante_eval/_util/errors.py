"""Errors said plainly: the one cause inside task-group wrappers, an OS error with its name.

An anyio task group wraps whatever ends its block in an exception group, so an
error raised inside a layer that serves something in the background (the
isolation layer's proxies and limits) reaches the caller as
``ExceptionGroup: unhandled errors in a TaskGroup`` and its cause is lost.
Boundaries unwrap it with :func:`sole_error`; :func:`describe_os_error` names an
``OSError`` as a user can look it up (``No space left on device (ENOSPC)``).
"""

from __future__ import annotations

import errno

import anyio

__all__ = ["describe_os_error", "sole_error"]


def _leaves(failure: BaseException) -> list[BaseException]:
    if not isinstance(failure, BaseExceptionGroup):
        return [failure]
    return [leaf for inner in failure.exceptions for leaf in _leaves(inner)]


def sole_error(failure: BaseException) -> BaseException:
    """``failure`` without its task-group wrappers: its first error that is no cancellation.

    A group holding only cancellations is returned as it is (the cancellation
    must reach its scope); so is anything that is not a group.
    """
    if not isinstance(failure, BaseExceptionGroup):
        return failure
    cancelled = anyio.get_cancelled_exc_class()
    errors = [leaf for leaf in _leaves(failure) if not isinstance(leaf, cancelled)]
    return errors[0] if errors else failure


def describe_os_error(exc: OSError) -> str:
    """``strerror (ENAME)`` and the file, when the error has them; else the error's text."""
    name = errno.errorcode.get(exc.errno) if isinstance(exc.errno, int) else None
    if exc.strerror is None or name is None:
        return str(exc)
    where = f": {exc.filename}" if exc.filename is not None else ""
    return f"{exc.strerror} ({name}){where}"
