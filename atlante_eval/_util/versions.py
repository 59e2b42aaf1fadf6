"""Exact host versions and named semver ranges, with no knowledge of any host.

Both the project layer (``eval.hostVersion`` must lie in the host's supported
range) and the hosts layer (a probed ``--version`` must too) read versions here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import semver

__all__ = ["VersionRange", "is_exact_version", "parse_version"]

_VERSION = re.compile(r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
_EXACT = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")


@dataclass(frozen=True, slots=True)
class VersionRange:
    """A named semver range such as ``V1 >=1.18.29 <2.0.0``."""

    name: str
    """Short name (``V1``, ``V2``, or the host name when it has one range)."""
    spec: str
    """Space-separated comparisons that must all hold, e.g. ``>=2.0.0 <3.0.0``."""

    def contains(self, version: semver.Version) -> bool:
        """Whether ``version`` satisfies every comparison of the range."""
        return all(version.match(clause) for clause in self.spec.split())


def parse_version(output: str) -> semver.Version | None:
    """Parse the first whitespace-delimited word of ``output`` as ``v?MAJOR.MINOR.PATCH``.

    Leading zeros, pre-release and build suffixes are rejected (``None``).
    """
    words = output.split()
    if not words:
        return None
    match = _VERSION.match(words[0])
    if match is None:
        return None
    major, minor, patch = (int(part) for part in match.groups())
    return semver.Version(major, minor, patch)


def is_exact_version(text: str) -> bool:
    """Whether ``text`` is exactly ``MAJOR.MINOR.PATCH`` (no ``v``, range, tag or suffix)."""
    return _EXACT.match(text) is not None
