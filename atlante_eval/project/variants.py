"""Arms (``eval.variants``): named variants of one run, compared against a control arm.

An arm overrides the model, the pinned host version and the harness the trials
run with. The harness is ``"project"`` (the project's verified native outputs),
``"none"`` (no native agent or skill files: the bare host) or a path to another
project root whose verified native outputs are installed instead. This module
holds the configuration model (:class:`VariantConfig`), the selection a run
makes (:func:`select_arms`) and the resolved :class:`Arm`; the run readies each
arm's host and native outputs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from ..diagnostics import Diagnostic, DiagnosticError, error, warning
from .native import NativeOutputs, verify_native_outputs
from .validation import NonEmptyStr, StrictModel

__all__ = [
    "ARM_NAME_PATTERN",
    "Arm",
    "ArmSelection",
    "HarnessKind",
    "VariantConfig",
    "arm_key",
    "arm_native",
    "arms_seed",
    "duplicate_arm_problems",
    "select_arms",
]

#: Arm names: letters, digits, ``.``, ``_`` and ``-`` (they name directories and columns).
ARM_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$"
#: What an arm's harness is: the project's outputs, none, or another root's.
HarnessKind = Literal["project", "none", "path"]
#: The arms a run asks for: ``None`` (every configured arm), ``"none"`` (no arms),
#: ``"all"``, or the names of the arms to run.
ArmSelection = Literal["none", "all"] | tuple[str, ...] | None
#: What separates a scenario name from an arm name in a non-control arm's trial key
#: (scenario names are slugs, so the key is unambiguous).
KEY_SEPARATOR = "@"


class VariantConfig(StrictModel):
    """One arm of ``eval.variants``: what it changes from the project's configuration."""

    name: Annotated[str, Field(pattern=ARM_NAME_PATTERN)]
    """The arm's name (unique): shown in reports, tables and ``--variant``."""
    model: NonEmptyStr | None = None
    """The model this arm's trials use (default ``eval.model``)."""
    host_version: NonEmptyStr | None = None
    """The exact host version this arm runs (default ``eval.hostVersion``)."""
    harness: NonEmptyStr = "project"
    """``"project"`` (the verified native outputs), ``"none"`` (no native agent and skill
    files) or a path (relative to the project root) to another project root whose
    verified native outputs to install instead."""
    control: bool | None = None
    """Whether this arm is the control the others are compared with (default: the first)."""

    @property
    def harness_kind(self) -> HarnessKind:
        """``project``, ``none`` or ``path``."""
        if self.harness in ("project", "none"):
            return "project" if self.harness == "project" else "none"
        return "path"


def duplicate_arm_problems(variants: Sequence[VariantConfig]) -> list[str]:
    """Why a list of arms is refused: duplicate names, more than one control."""
    problems: list[str] = []
    seen: set[str] = set()
    for variant in variants:
        if variant.name in seen:
            problems.append(f'eval.variants names the arm "{variant.name}" twice')
        seen.add(variant.name)
    controls = [v.name for v in variants if v.control]
    if len(controls) > 1:
        problems.append(
            f"eval.variants has {len(controls)} control arms ({', '.join(controls)}); "
            'at most one may say "control": true'
        )
    return problems


@dataclass(frozen=True, slots=True)
class Arm:
    """One arm of a run, resolved against the project."""

    name: str
    control: bool
    model: str | None
    """The model (the arm's, else ``eval.model``)."""
    host_version: str | None
    """The pinned host version (the arm's, else the run's pin)."""
    harness: HarnessKind
    harness_root: Path | None
    """The other project root of a ``path`` harness."""
    harness_text: str
    """The harness as configured (``project``, ``none`` or the path)."""


def select_arms(
    variants: Sequence[VariantConfig] | None,
    selection: ArmSelection,
    *,
    project_root: Path,
    model: str | None,
    host_version: str | None,
) -> tuple[tuple[Arm, ...], list[Diagnostic]]:
    """The arms a run runs (empty: a run of one harness) and the warnings about them.

    Raises:
        DiagnosticError: ``unknown-variant`` for a ``--variant`` name no arm has, or
            ``--variant`` without ``eval.variants`` (exit 2).
    """
    configured = list(variants or ())
    if selection == "none" or (not configured and selection in (None, "all")):
        return (), []
    chosen = configured if selection in (None, "all") else _named(configured, selection)
    control = next((v for v in chosen if v.control), None)
    notes: list[Diagnostic] = []
    if control is None:
        control = chosen[0]
        wanted = next((v for v in configured if v.control), configured[0])
        if wanted.name != control.name:
            notes.append(
                warning(
                    "variant-control-not-selected",
                    f'the control arm "{wanted.name}" is not selected: "{control.name}" is '
                    "the control of this run (uplift is measured against it)",
                    next=f"add --variant {wanted.name} to compare against the configured control",
                )
            )
    arms = tuple(
        Arm(
            name=v.name,
            control=v is control,
            model=v.model or model,
            host_version=v.host_version or host_version,
            harness=v.harness_kind,
            harness_root=(project_root / v.harness).resolve() if v.harness_kind == "path" else None,
            harness_text=v.harness,
        )
        for v in chosen
    )
    return arms, notes


def _named(configured: list[VariantConfig], names: Sequence[str]) -> list[VariantConfig]:
    """The configured arms ``names`` selects, in configuration order."""
    known = {v.name for v in configured}
    unknown = [name for name in names if name not in known]
    if unknown:
        listed = ", ".join(sorted(known)) or "none (eval.variants is not set)"
        raise DiagnosticError(
            [
                error(
                    "unknown-variant",
                    f"--variant {unknown[0]}: no arm of eval.variants has that name",
                    expected=f"one of: {listed}",
                    next="use an arm name from eval.variants (docs/variants.md)",
                )
            ]
        )
    wanted = set(names)
    return [v for v in configured if v.name in wanted]


def arm_key(scenario: str, arm: str | None, *, control: bool) -> str:
    """The key of a scenario's trials of one arm: the scenario name for the control arm
    (and a run without arms), ``scenario@arm`` for the others."""
    return scenario if arm is None or control else f"{scenario}{KEY_SEPARATOR}{arm}"


#: The digest of a harness with no native outputs (``"none"``).
_NONE_DIGEST = hashlib.sha256(b"atlante-eval: harness none").hexdigest()


def arm_native(arm: Arm, project_native: NativeOutputs, host: str) -> NativeOutputs:
    """The native outputs an arm installs into each sandbox.

    Raises:
        DiagnosticError: ``variant-harness-not-verified`` when a path arm's root has
            no verified native outputs for the host (exit 2).
    """
    if arm.harness == "project":
        return project_native
    if arm.harness == "none":
        return NativeOutputs(
            host=project_native.host,
            manifest_path=project_native.manifest_path,
            files=(),
            digest=_NONE_DIGEST,
        )
    assert arm.harness_root is not None
    try:
        return verify_native_outputs(arm.harness_root, host)
    except DiagnosticError as exc:
        cause = exc.diagnostics[0].message if exc.diagnostics else "not verified"
        raise DiagnosticError(
            [
                error(
                    "variant-harness-not-verified",
                    f'arm "{arm.name}": the harness {arm.harness_text!r} ({arm.harness_root}) '
                    f"has no verified native outputs for {host}: {cause}",
                    source=arm.harness_text,
                    next="point harness at a project root built with `atlante build` (its "
                    '.atlante/*-native.json manifest and files), or use "project" or "none"',
                )
            ]
        ) from None


def arms_seed(scenarios: Sequence[str], arms: Sequence[Arm], trials: int) -> int:
    """The seed of the arms' order within each block: derived from the plan, so every
    shard of a run (and a resumed run) shuffles alike."""
    text = "\n".join([*sorted(scenarios), "--", *(a.name for a in arms), str(trials)])
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:4], "big")
