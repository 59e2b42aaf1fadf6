"""Fixtures for the real-host tests: ``real_hosts`` and ``mock_model``."""

from .fixtures import mock_model, real_hosts

__all__ = ["mock_model", "real_hosts"]
