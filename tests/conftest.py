"""Suite-wide test settings."""

from __future__ import annotations

import os

from hypothesis import settings

# CI is a gate: property tests there explore the same examples on every run, so a
# red run is reproducible. Local runs stay random, to keep finding new inputs.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
