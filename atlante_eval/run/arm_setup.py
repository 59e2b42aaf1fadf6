"""What one arm of a run runs with: its host, its native outputs, its model.

The engine reads a trial's :class:`ArmSetup` by the trial's arm; a run without
arms has one setup, the run's own (:func:`single_setup`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hosts.base import Host
from ..project import NativeOutputs
from ..project.variants import Arm
from ..report import HostSource

__all__ = ["ArmSetup"]


@dataclass(frozen=True, slots=True)
class ArmSetup:
    """One arm's host (probed), native outputs and model."""

    arm: Arm
    host: Host
    host_source: HostSource | None
    native: NativeOutputs
    model: str | None

    @property
    def drops_agent(self) -> bool:
        """Whether the arm runs without native agents (``harness: "none"``): a scenario's
        ``task.agent`` is then not passed to the host."""
        return self.arm.harness == "none"
