"""Ready a run's arms (``eval.variants``) before its directory is reserved.

:func:`ready_arms` selects the arms (``--variant``/``--variants``), gives each
its host (the run's own when the arm keeps the run's pinned version; another
managed copy, probed and checked, when it pins another), its native outputs
(the project's, none, or another root's verified ones) and its model, and
returns the warnings about them: a ``none`` arm whose scenarios name an agent
runs them without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack

from ..diagnostics import Diagnostic, DiagnosticError, error, warning
from ..hosts import Host
from ..project import Scenario, Suite, model_diagnostics
from ..project.preflight import agent_diagnostics
from ..project.variants import Arm, arm_native, select_arms
from ..report import ArmInfo, ProgressEvent
from .arm_setup import ArmSetup
from .options import RunOptions
from .pinning import RunHost, check_pinned_version, run_host

__all__ = ["arm_infos", "check_arm_selection", "ready_arms"]


def check_arm_selection(suite: Suite, options: RunOptions) -> bool:
    """Refuse a bad arm selection before any host is readied (exit 2); whether the run has arms.

    An adaptive run needs a baseline: BASE (``--against``) without arms, the control
    arm with them.

    Raises:
        DiagnosticError: ``unknown-variant``, or ``invalid-option`` for ``--until-decided``
            without ``--against`` or arms, or for ``--against`` with arms.
    """
    config = suite.project.eval
    arms, _notes = select_arms(
        config.variants,
        options.variants,
        project_root=suite.project.root,
        model=config.model,
        host_version=None,
    )
    if options.until_decided and not arms and options.against is None:
        raise DiagnosticError([_no_baseline()])
    if arms and options.against is not None:
        raise DiagnosticError([_against_with_arms()])
    return bool(arms)


async def ready_arms(
    suite: Suite,
    options: RunOptions,
    run: RunHost,
    *,
    given: Host | None,
    scenarios: Sequence[Scenario],
    on_event: Callable[[ProgressEvent], object] | None,
    leases: ExitStack,
) -> tuple[dict[str, ArmSetup], list[Diagnostic]]:
    """Every selected arm's setup, by name (empty: the run has no arms), and warnings.

    Raises:
        DiagnosticError: ``unknown-variant``, ``variant-harness-not-verified``,
            ``unknown-scenario-agent`` (a path arm's build lacks an agent), an arm's
            model the host refuses (exit 2); an arm's host that cannot be installed or
            probed (exit 3).
    """
    config = suite.project.eval
    arms, notes = select_arms(
        config.variants,
        options.variants,
        project_root=suite.project.root,
        model=config.model,
        host_version=run.pin,
    )
    if not arms:
        return {}, notes
    assert suite.native is not None
    setups: dict[str, ArmSetup] = {}
    hosts: dict[str | None, RunHost] = {run.pin: run}
    for arm in arms:
        if arm.host_version not in hosts:
            extra = await run_host(
                given, config, arm.host_version, on_event=on_event, leases=leases
            )
            await extra.host.probe()
            check_pinned_version(extra)
            hosts[arm.host_version] = extra
        chosen = hosts[arm.host_version]
        native = arm_native(arm, suite.native, config.host)
        notes.extend(_arm_notes(arm, chosen.host, native, scenarios, config.host))
        setups[arm.name] = ArmSetup(
            arm=arm,
            host=chosen.host,
            host_source=chosen.probed_source(),
            native=native,
            model=arm.model,
        )
    return setups, notes


def _arm_notes(
    arm: Arm, host: Host, native: object, scenarios: Sequence[Scenario], host_name: str
) -> list[Diagnostic]:
    """The warnings (and refusals) about one arm's model and harness."""
    notes = model_diagnostics(host.name, arm.model, getattr(host, "dialect", None))
    if arm.harness == "path":
        from ..project import NativeOutputs

        assert isinstance(native, NativeOutputs)
        notes += agent_diagnostics(scenarios, native, host_name)
    if any(d.severity == "error" for d in notes):
        raise DiagnosticError([_in_arm(arm, d) for d in notes if d.severity == "error"])
    agents = sorted({s.name for s in scenarios if s.document.task.agent is not None})
    if arm.harness == "none" and agents:
        notes.append(
            warning(
                "variant-agent-dropped",
                f'arm "{arm.name}" (harness "none") runs {", ".join(agents)} without their '
                "task.agent: the bare host with its default agent",
                next="expected for a no-harness arm; each such trial says so in its "
                "hostEvidence.agentDropped",
            )
        )
    return notes


def _in_arm(arm: Arm, problem: Diagnostic) -> Diagnostic:
    """``problem`` said of one arm."""
    return problem.model_copy(update={"message": f'arm "{arm.name}": {problem.message}'})


def _no_baseline() -> Diagnostic:
    return error(
        "invalid-option",
        "--until-decided needs --against BASELINE_REPORT (the report to compare with), "
        "or arms in eval.variants (each is then decided against the control arm)",
        next="add --against PATH (a report.json or its run directory)",
    )


def _against_with_arms() -> Diagnostic:
    return error(
        "invalid-option",
        "--against compares with a BASE report, but this run has arms: --until-decided "
        "decides each arm against the run's own control arm",
        next="drop --against, or add --variants none to run the project against BASE",
    )


def arm_infos(setups: dict[str, ArmSetup]) -> list[ArmInfo]:
    """``meta.variants``: the arms as they run, the control first."""
    ordered = sorted(setups.values(), key=lambda s: not s.arm.control)
    return [
        ArmInfo(
            name=s.arm.name,
            control=s.arm.control,
            model=s.model,
            host_version=s.host.version,
            harness=s.arm.harness_text,
            manifest_digest=s.native.digest,
            scenario_key=None if s.arm.control else f"@{s.arm.name}",
        )
        for s in ordered
    ]
