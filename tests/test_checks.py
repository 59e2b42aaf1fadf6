"""The six checks: pass, fail and error, with the exact evidence of spec §8."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from unprivileged import give_to_nobody, nobody_workspace, python_as_nobody

from atlante_eval import CheckResult
from atlante_eval.checks import CheckContext, ignore_matcher, run_checks
from atlante_eval.project import (
    CommandCheck,
    DiffAllowlistCheck,
    FileAbsentCheck,
    FileContainsCheck,
    FileExistsCheck,
    FileUnchangedCheck,
)
from atlante_eval.project.scenarios import Check
from atlante_eval.trial import Changes, collect_changes
from atlante_eval.trial import process as process_module
from atlante_eval.trial.gitops import make_baseline

PY = sys.executable


@pytest.fixture
def anyio_backend() -> str:
    """Run these tests on asyncio."""
    return "asyncio"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A sandbox root with a few files."""
    sandbox = tmp_path / "sandbox"
    (sandbox / "src").mkdir(parents=True)
    (sandbox / "README.md").write_text("hello world\n")
    (sandbox / "src" / "routes.ts").write_text('export const health = { "status": "ok" };\n')
    return sandbox


def ctx(root: Path, **fields: Any) -> CheckContext:
    """A CheckContext over ``root`` with no snapshot and no changes unless given."""
    return CheckContext(
        root=root,
        snapshot=fields.pop("snapshot", {}),
        changes=fields.pop("changes", Changes(paths=(), diff="")),
        **fields,
    )


async def one(check: Check, context: CheckContext) -> tuple[str, dict[str, Any]]:
    """Run a single check and return its verdict and evidence."""
    [result] = await run_checks([check], context)
    assert result.index == 0
    assert result.type == check.type
    return result.verdict, result.evidence


def command(*run: str, **fields: Any) -> CommandCheck:
    return CommandCheck(type="command", run=list(run), **fields)


def py(code: str, **fields: Any) -> CommandCheck:
    return command(PY, "-c", code, **fields)


# -- command ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_command_pass_keeps_full_evidence(root: Path) -> None:
    """A zero exit passes with run, exit, expectExit and trimmed output as evidence."""
    verdict, evidence = await one(py("print('  all good  ')"), ctx(root))
    assert verdict == "pass"
    assert evidence == {
        "run": [PY, "-c", "print('  all good  ')"],
        "exit": 0,
        "expectExit": 0,
        "output": "all good",
    }


@pytest.mark.anyio
async def test_command_exit_mismatch_fails(root: Path) -> None:
    """An exit status other than expectExit fails; a matching non-zero one passes."""
    failing = await one(py("import sys; sys.exit(2)"), ctx(root))
    expected = await one(py("import sys; sys.exit(3)", expect_exit=3), ctx(root))
    assert failing[0] == "fail"
    assert (failing[1]["exit"], failing[1]["expectExit"]) == (2, 0)
    assert expected[0] == "pass"
    assert (expected[1]["exit"], expected[1]["expectExit"]) == (3, 3)


@pytest.mark.anyio
async def test_command_output_pattern_searches_stdout_and_stderr(root: Path) -> None:
    """outputMatches searches combined stdout and stderr; no match fails."""
    code = "import sys; print('out'); print('3 passed', file=sys.stderr)"
    matched = await one(py(code, output_matches=r"\d+ passed"), ctx(root))
    missed = await one(py(code, output_matches=r"^failed"), ctx(root))
    assert matched == (
        "pass",
        {
            "run": [PY, "-c", code],
            "exit": 0,
            "expectExit": 0,
            "output": "out\n\n3 passed",
            "outputMatches": r"\d+ passed",
        },
    )
    assert missed[0] == "fail"
    assert missed[1]["outputMatches"] == "^failed"


@pytest.mark.anyio
async def test_command_pattern_is_not_checked_when_exit_fails(root: Path) -> None:
    """A matching output does not rescue a wrong exit status."""
    verdict, evidence = await one(
        py("print('ok'); raise SystemExit(1)", output_matches="ok"), ctx(root)
    )
    assert verdict == "fail"
    assert evidence["exit"] == 1


@pytest.mark.anyio
async def test_command_timeout_fails_with_timed_out(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A timed-out command fails with timedOut: true, even if it exits 0 on SIGTERM."""
    monkeypatch.setattr(process_module, "DEFAULT_GRACE_S", 0.5)
    killed = await one(py("import time; time.sleep(30)", timeout_ms=300), ctx(root))
    polite = await one(
        py(
            "import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
            "print('started', flush=True)\n"
            "time.sleep(30)\n",
            timeout_ms=300,
        ),
        ctx(root),
    )
    assert killed[0] == "fail"
    assert killed[1]["timedOut"] is True
    assert killed[1]["exit"] is None
    assert list(killed[1]) == ["run", "exit", "expectExit", "timedOut", "output"]
    assert polite[0] == "fail"
    assert polite[1]["timedOut"] is True
    assert polite[1]["exit"] == 0
    assert polite[1]["output"] == "started"


@pytest.mark.anyio
async def test_command_killed_by_a_signal_has_null_exit(root: Path) -> None:
    """A command ended by a signal fails with exit null."""
    verdict, evidence = await one(
        py("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"), ctx(root)
    )
    assert verdict == "fail"
    assert evidence["exit"] is None


@pytest.mark.anyio
async def test_command_that_cannot_start_is_an_error(root: Path) -> None:
    """A missing program is an error with run and cause."""
    verdict, evidence = await one(command("atlante-no-such-check"), ctx(root))
    assert verdict == "error"
    assert set(evidence) == {"run", "cause"}
    assert evidence["run"] == ["atlante-no-such-check"]
    assert "atlante-no-such-check" in evidence["cause"]


@pytest.mark.anyio
async def test_command_output_evidence_keeps_the_last_2000_characters(root: Path) -> None:
    """Output evidence is the last 2,000 characters of trimmed stdout + stderr."""
    verdict, evidence = await one(py("print('a' * 5000 + 'END')"), ctx(root))
    assert verdict == "pass"
    assert len(evidence["output"]) == 2000
    assert evidence["output"].endswith("aEND")


@pytest.mark.anyio
async def test_command_runs_in_the_sandbox_without_a_shell(root: Path) -> None:
    """The argv runs in the sandbox root and is not interpreted by a shell."""
    verdict, evidence = await one(
        py("import os; print(os.getcwd())", output_matches="^NEVER$"),
        ctx(root),
    )
    assert verdict == "fail"
    assert evidence["output"].splitlines()[0] == str(root)
    args = await one(command(PY, "-c", "import sys; print(sys.argv[1])", "$HOME;*"), ctx(root))
    assert args[1]["output"] == "$HOME;*"


@pytest.mark.anyio
async def test_command_environment_has_no_secrets(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Command checks see only the allowlisted environment, with the real HOME."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("ATLANTE_SECRET_MARKER", "marker")
    monkeypatch.setenv("HTTPS_PROXY", "https://user:pw@example.test:8443")
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    verdict, evidence = await one(py(code), ctx(root))
    import json

    env = json.loads(evidence["output"])
    assert verdict == "pass"
    assert "ANTHROPIC_API_KEY" not in env
    assert "ATLANTE_SECRET_MARKER" not in env
    assert env["HTTPS_PROXY"] == "https://example.test:8443/"
    assert env.get("HOME") == os.environ.get("HOME")
    allowed = {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "HTTPS_PROXY", "LC_CTYPE"}
    assert set(env) <= allowed | {"ATLANTE_EVAL_PROCESS"}  # the sweep marker: a random id


@pytest.mark.anyio
async def test_invalid_output_pattern_is_an_error_not_an_exception(root: Path) -> None:
    """An uncompilable outputMatches (bypassing validation) yields an error verdict."""
    check = CommandCheck.model_construct(
        type="command", run=[PY, "-c", "pass"], expect_exit=0, output_matches="(", timeout_ms=5000
    )
    verdict, evidence = await one(check, ctx(root))
    assert verdict == "error"
    assert evidence["cause"].startswith("invalid outputMatches pattern:")


# -- file-exists / file-absent ---------------------------------------------------------


def _missing(path: str, *, exists: bool, expect: bool) -> dict[str, Any]:
    return {"path": path, "exists": exists, "expectExists": expect}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("kind", "path", "verdict", "evidence"),
    [
        ("file-exists", "README.md", "pass", {}),
        ("file-exists", "src", "pass", {}),
        ("file-exists", "nope.txt", "fail", _missing("nope.txt", exists=False, expect=True)),
        ("file-exists", "README.md/x", "fail", _missing("README.md/x", exists=False, expect=True)),
        ("file-absent", "nope.txt", "pass", {}),
        ("file-absent", "README.md", "fail", _missing("README.md", exists=True, expect=False)),
        ("file-absent", "src", "fail", _missing("src", exists=True, expect=False)),
    ],
)
async def test_exists_and_absent_truth_table(
    root: Path, kind: str, path: str, verdict: str, evidence: dict[str, Any]
) -> None:
    """file-exists and file-absent pass or fail with {path, exists, expectExists}."""
    model = FileExistsCheck if kind == "file-exists" else FileAbsentCheck
    assert await one(model(type=kind, path=path), ctx(root)) == (verdict, evidence)  # type: ignore[arg-type]


# -- path safety -------------------------------------------------------------------------


def _unsafe(kind: str, path: str) -> Check:
    if kind == "file-exists":
        return FileExistsCheck.model_construct(type="file-exists", path=path)
    if kind == "file-absent":
        return FileAbsentCheck.model_construct(type="file-absent", path=path)
    if kind == "file-unchanged":
        return FileUnchangedCheck.model_construct(type="file-unchanged", path=path)
    return FileContainsCheck.model_construct(
        type="file-contains", path=path, pattern="x", regex=False
    )


KINDS = ["file-exists", "file-absent", "file-unchanged", "file-contains"]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path", ["../escape.ts", "/etc/passwd", "ok/../../escape.ts"])
async def test_escaping_paths_are_errors(root: Path, kind: str, path: str) -> None:
    """Absolute paths and '..' segments are errors, never a look outside the sandbox."""
    snapshot = {path: None}
    verdict, evidence = await one(_unsafe(kind, path), ctx(root, snapshot=snapshot))
    assert verdict == "error"
    assert evidence == {"path": path, "cause": "check path must resolve inside the sandbox"}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_symlinked_paths_are_errors(root: Path, tmp_path: Path, kind: str) -> None:
    """A symlink at the end of, or along, a checked path is an error for every file check."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("x")
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "linkdir").symlink_to(outside)
    snapshot = {"link.txt": None, "linkdir/secret.txt": None}
    final = await one(_unsafe(kind, "link.txt"), ctx(root, snapshot=snapshot))
    along = await one(_unsafe(kind, "linkdir/secret.txt"), ctx(root, snapshot=snapshot))
    assert final == (
        "error",
        {"path": "link.txt", "cause": "path traverses a symbolic link at link.txt"},
    )
    assert along == (
        "error",
        {"path": "linkdir/secret.txt", "cause": "path traverses a symbolic link at linkdir"},
    )


@pytest.mark.anyio
async def test_a_symlinked_sandbox_root_is_an_error(root: Path, tmp_path: Path) -> None:
    """When the sandbox root itself is a symlink, file checks error."""
    link = tmp_path / "root-link"
    link.symlink_to(root)
    verdict, evidence = await one(FileExistsCheck(type="file-exists", path="README.md"), ctx(link))
    assert verdict == "error"
    assert evidence["cause"] == "sandbox root is not a real directory"


# -- file-contains -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_file_contains_literal_and_regex(root: Path) -> None:
    """Literal text is a substring test; regex true searches with a regular expression."""

    def contains(pattern: str, *, regex: bool = False, path: str = "src/routes.ts") -> Check:
        return FileContainsCheck(type="file-contains", path=path, pattern=pattern, regex=regex)

    context = ctx(root)
    assert await one(contains('"status": "ok"'), context) == ("pass", {})
    assert await one(contains("status.*ok"), context) == (
        "fail",
        {"path": "src/routes.ts", "pattern": "status.*ok"},
    )
    assert await one(contains(r'"status":\s+"ok"', regex=True), context) == ("pass", {})
    assert await one(contains(r"^health", regex=True), context) == (
        "fail",
        {"path": "src/routes.ts", "pattern": "^health", "regex": True},
    )
    assert await one(contains("x", path="missing.ts"), context) == (
        "fail",
        {"path": "missing.ts", "exists": False},
    )
    assert await one(contains("x", path="src"), context) == (
        "fail",
        {"path": "src", "exists": True},
    )


@pytest.mark.anyio
async def test_file_contains_reads_invalid_utf8_lossily(root: Path) -> None:
    """A file with invalid UTF-8 is read lossily; non-ASCII patterns match."""
    (root / "mixed.txt").write_bytes(b"caf\xc3\xa9 \xff\xfe end")
    check = FileContainsCheck(type="file-contains", path="mixed.txt", pattern="café \ufffd")
    assert await one(check, ctx(root)) == ("pass", {})


@pytest.mark.anyio
async def test_file_contains_invalid_regex_is_an_error(root: Path) -> None:
    """An uncompilable regex (bypassing validation) is an error, not an exception."""
    check = FileContainsCheck.model_construct(
        type="file-contains", path="README.md", pattern="(", regex=True
    )
    assert await one(check, ctx(root)) == (
        "error",
        {"path": "README.md", "cause": "invalid regular expression"},
    )


# -- file-unchanged ----------------------------------------------------------------------


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.anyio
async def test_file_unchanged_cases(root: Path) -> None:
    """Unchanged and absent-both pass; edits, creation and deletion fail with both hashes."""
    (root / "deleted.txt").write_text("bye\n")
    snapshot = {
        "README.md": sha(b"hello world\n"),
        "src/routes.ts": sha(b"before\n"),
        "absent.txt": None,
        "created.txt": None,
        "deleted.txt": sha(b"bye\n"),
    }
    (root / "created.txt").write_text("new\n")
    (root / "deleted.txt").unlink()
    context = ctx(root, snapshot=snapshot)

    def unchanged(path: str) -> Check:
        return FileUnchangedCheck(type="file-unchanged", path=path)

    assert await one(unchanged("README.md"), context) == ("pass", {})
    assert await one(unchanged("absent.txt"), context) == ("pass", {})
    assert await one(unchanged("src/routes.ts"), context) == (
        "fail",
        {
            "path": "src/routes.ts",
            "baselineHash": sha(b"before\n"),
            "currentHash": sha(b'export const health = { "status": "ok" };\n'),
        },
    )
    assert await one(unchanged("created.txt"), context) == (
        "fail",
        {"path": "created.txt", "baselineHash": None, "currentHash": sha(b"new\n")},
    )
    assert await one(unchanged("deleted.txt"), context) == (
        "fail",
        {"path": "deleted.txt", "baselineHash": sha(b"bye\n"), "currentHash": None},
    )
    assert await one(unchanged("no-entry.txt"), context) == (
        "error",
        {"path": "no-entry.txt", "cause": "no baseline snapshot entry"},
    )


def test_unreadable_file_is_an_error_and_later_checks_still_run() -> None:
    """A file that cannot be read makes file-unchanged an error; the next check still runs.

    Run as ``nobody``: root reads any file.
    """
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "import anyio\n"
        "from atlante_eval.checks import CheckContext, run_checks\n"
        "from atlante_eval.trial.gitops import Changes\n"
        "from atlante_eval.project.scenarios import FileExistsCheck, FileUnchangedCheck\n"
        "checks = [FileUnchangedCheck(type='file-unchanged', path='README.md'),\n"
        "          FileExistsCheck(type='file-exists', path='src')]\n"
        "context = CheckContext(root=Path(sys.argv[1]), snapshot={'README.md': sys.argv[2]},\n"
        "                       changes=Changes(paths=(), diff=''))\n"
        "results = anyio.run(run_checks, checks, context)\n"
        "print(json.dumps([[r.verdict, r.evidence] for r in results]))\n"
    )
    with nobody_workspace() as base:
        root = base / "sandbox"
        (root / "src").mkdir(parents=True)
        (root / "README.md").write_text("hello world\n")
        give_to_nobody(root)
        (root / "README.md").chmod(0)
        done = python_as_nobody(code, base, str(root), sha(b"hello world\n"))
    assert done.returncode == 0, done.stderr
    (unchanged_verdict, evidence), (exists_verdict, _) = json.loads(done.stdout)
    assert (unchanged_verdict, exists_verdict) == ("error", "pass")
    assert "Permission denied" in evidence["cause"]


# -- diff-allowlist ----------------------------------------------------------------------


async def changes_after(root: Path, tmp_path: Path, edit: Any) -> Changes:
    """Baseline ``root``, apply ``edit(root)``, then collect the changes."""
    sha_ = await make_baseline(root, tmp_path / "b.git")
    edit(root)
    return await collect_changes(root, tmp_path / "b.git", sha_)


def allow(*paths: str) -> Check:
    return DiffAllowlistCheck(type="diff-allowlist", allow=list(paths))


@pytest.mark.anyio
async def test_diff_allowlist_passes_within_the_list(root: Path, tmp_path: Path) -> None:
    """Changes all inside the allowlist pass with empty evidence."""

    def edit(sandbox: Path) -> None:
        (sandbox / "src" / "routes.ts").write_text("changed\n")

    changes = await changes_after(root, tmp_path, edit)
    assert await one(allow("src/routes.ts", "src/health.test.ts"), ctx(root, changes=changes)) == (
        "pass",
        {},
    )


@pytest.mark.anyio
async def test_diff_allowlist_flags_unexpected_and_gitignored_files(
    root: Path, tmp_path: Path
) -> None:
    """Paths outside the list fail (gitignored ones too), with allow, unexpected and changed."""
    (root / ".gitignore").write_text("*.log\n")

    def edit(sandbox: Path) -> None:
        (sandbox / "src" / "routes.ts").write_text("changed\n")
        (sandbox / "debug.log").write_text("ignored but new\n")
        (sandbox / "README.md").unlink()

    changes = await changes_after(root, tmp_path, edit)
    verdict, evidence = await one(
        allow("src/routes.ts", "src/routes.ts"), ctx(root, changes=changes)
    )
    assert verdict == "fail"
    assert evidence == {
        "allow": ["src/routes.ts"],
        "unexpected": ["README.md", "debug.log"],
        "changed": ["README.md", "debug.log", "src/routes.ts"],
    }


@pytest.mark.anyio
async def test_diff_allowlist_ignores_only_host_runtime_artefacts(
    root: Path, tmp_path: Path
) -> None:
    """Host runtime globs are ignored; native outputs and host config edits still count."""
    (root / ".opencode" / "agents").mkdir(parents=True)
    (root / ".opencode" / "agents" / "reviewer.md").write_text("native\n")
    (root / ".opencode" / "opencode.jsonc").write_text("{}\n")

    def edit(sandbox: Path) -> None:
        (sandbox / ".opencode" / "node_modules" / "pkg").mkdir(parents=True)
        (sandbox / ".opencode" / "node_modules" / "pkg" / "index.js").write_text("x")
        (sandbox / ".opencode" / ".gitignore").write_text("node_modules\n")
        (sandbox / ".opencode" / "agents" / "reviewer.md").write_text("rewritten by agent\n")
        (sandbox / ".opencode" / "opencode.jsonc").write_text('{"permission": "allow"}\n')
        (sandbox / ".opencode" / "stray.md").write_text("x")

    changes = await changes_after(root, tmp_path, edit)
    ignored = ignore_matcher([".opencode/node_modules/**", ".opencode/.gitignore"])
    verdict, evidence = await one(
        allow("src/routes.ts"), ctx(root, changes=changes, ignored=ignored)
    )
    assert verdict == "fail"
    assert evidence["unexpected"] == [
        ".opencode/agents/reviewer.md",
        ".opencode/opencode.jsonc",
        ".opencode/stray.md",
    ]
    assert evidence["changed"] == evidence["unexpected"]


@pytest.mark.anyio
async def test_diff_allowlist_matches_special_and_non_ascii_paths_literally(
    root: Path, tmp_path: Path
) -> None:
    """Quotes, tabs, spaces, a leading -- and non-ASCII names match allow entries literally."""
    names = ['quote"d.ts', "tab\tname.ts", "space name.ts", "--tracked.ts", "ünï/日本.md"]
    (root / "--tracked.ts").write_text("before\n")

    def edit(sandbox: Path) -> None:
        for name in names:
            (sandbox / name).parent.mkdir(parents=True, exist_ok=True)
            (sandbox / name).write_text("after\n")

    changes = await changes_after(root, tmp_path, edit)
    exists = [FileExistsCheck(type="file-exists", path=name) for name in names]
    results = await run_checks([*exists, allow(*names)], ctx(root, changes=changes))
    assert [r.verdict for r in results] == ["pass"] * (len(names) + 1)
    verdict, evidence = await one(allow(*names[:-1]), ctx(root, changes=changes))
    assert verdict == "fail"
    assert evidence["unexpected"] == ["ünï/日本.md"]


@pytest.mark.anyio
async def test_diff_allowlist_with_index_flags_and_fsmonitor_in_the_sandbox(
    root: Path, tmp_path: Path
) -> None:
    """Edits hidden with index flags are caught, and a planted fsmonitor hook never runs."""
    (root / "--tracked.ts").write_text("before\n")
    marker = tmp_path / "fsmonitor-ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)

    def edit(sandbox: Path) -> None:
        def git(*args: str) -> None:
            subprocess.run(["git", *args], cwd=sandbox, check=True, capture_output=True)

        git("update-index", "--skip-worktree", "--", "--tracked.ts")
        git("update-index", "--assume-unchanged", "README.md")
        git("config", "core.fsmonitor", str(hook))
        (sandbox / "--tracked.ts").write_text("hidden\n")
        (sandbox / "README.md").write_text("hidden too\n")

    changes = await changes_after(root, tmp_path, edit)
    verdict, evidence = await one(allow("src/routes.ts"), ctx(root, changes=changes))
    assert verdict == "fail"
    assert evidence["unexpected"] == ["--tracked.ts", "README.md"]
    assert not marker.exists()


@pytest.mark.anyio
async def test_diff_allowlist_without_changes_is_an_error(root: Path) -> None:
    """When the changes could not be collected, diff-allowlist is an error with the cause."""
    context = ctx(root, changes=None, changes_error="could not collect sandbox diff: boom")
    assert await one(allow("x"), context) == (
        "error",
        {"cause": "could not collect sandbox diff: boom"},
    )


# -- running every check -------------------------------------------------------------------


@pytest.mark.anyio
async def test_every_check_runs_after_failures_and_errors(root: Path) -> None:
    """All checks run in order even after an error and a failure, each with a duration."""
    checks: list[Check] = [
        command("atlante-no-such-check"),
        FileExistsCheck(type="file-exists", path="missing.txt"),
        _unsafe("file-absent", "../escape.ts"),
        FileContainsCheck(type="file-contains", path="README.md", pattern="hello"),
        py("print('last')"),
    ]
    results = await run_checks(checks, ctx(root))
    assert [(r.index, r.type, r.verdict) for r in results] == [
        (0, "command", "error"),
        (1, "file-exists", "fail"),
        (2, "file-absent", "error"),
        (3, "file-contains", "pass"),
        (4, "command", "pass"),
    ]
    assert all(isinstance(r, CheckResult) and r.duration_ms is not None for r in results)


@pytest.mark.anyio
async def test_an_unexpected_exception_in_one_check_is_an_error(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug inside one check becomes that check's error; the next check still runs."""
    from atlante_eval.checks import CHECK_KINDS
    from atlante_eval.checks.context import Outcome

    async def broken(*_args: object) -> Outcome:
        raise ValueError("kaboom")

    kind = dataclasses.replace(CHECK_KINDS["file-contains"], run=broken)
    monkeypatch.setitem(CHECK_KINDS, "file-contains", kind)
    results = await run_checks(
        [
            FileContainsCheck(type="file-contains", path="README.md", pattern="x"),
            FileExistsCheck(type="file-exists", path="README.md"),
        ],
        ctx(root),
    )
    assert [r.verdict for r in results] == ["error", "pass"]
    assert results[0].evidence == {
        "path": "README.md",
        "cause": "unexpected error: ValueError: kaboom",
    }


def test_ignore_matcher_uses_globstar_and_dotfiles() -> None:
    """Ignore globs match dot directories and any depth with **; nothing when empty."""
    matcher = ignore_matcher([".opencode/node_modules/**", ".claude/*.local.json"])
    assert matcher(".opencode/node_modules/a/b/c.js")
    assert matcher(".claude/settings.local.json")
    assert not matcher(".claude/settings.json")
    assert not matcher(".opencode/agents/x.md")
    assert not ignore_matcher([])("anything")


@pytest.mark.anyio
async def test_file_contains_refuses_a_huge_file_as_an_error(root: Path) -> None:
    """A file over 64 MiB is not read: file-contains is an error naming the limit."""
    with (root / "huge.bin").open("wb") as handle:
        handle.truncate(65 * 1024 * 1024)
    check = FileContainsCheck(type="file-contains", path="huge.bin", pattern="x")
    verdict, evidence = await one(check, ctx(root))
    assert verdict == "error"
    assert evidence == {
        "path": "huge.bin",
        "cause": "could not inspect sandbox path: file is larger than 64 MiB",
    }
