"""One ``oomguard check`` run: read, check, fix, and the JSON contract.

``check_target`` is the library entry point the CLI, the benchmark and the
tests share. ``CheckReport.to_dict`` is the JSON contract: ``findings`` (errors
first; rule, severity, title, message, flags, location, fix), ``fixed_command``
(the corrected launch as one string, or null when nothing changes) and
``plan`` (the ``oomguard plan`` JSON of the launch as given, when it could be
planned). Extra keys (``vllm_version``, ``fixed_form``, ``diff``,
``fixed_check``, ``skipped_rules``, ``ignored``, ``notes``) are additions, and:

- ``complete``: false when memory rules could not run (the OG001 finding says
  which and what to pass; the exit code is then non-zero);
- ``goal_fixes``: for a launch predicted not to start, the ranked, plan-verified
  edits of ``oomguard.fit.goalfix`` (``rank``, ``flags``, ``edits``,
  ``keeps_goal``, ``kv_cache_tokens``, ``max_concurrency``, ``headroom_gib``,
  ``headroom_floor_gib``, ``kv_spare_gib``, ``robust``, ``cost``, ``tradeoffs``,
  ``applied_by_fix``); #1 is what ``--fix`` applies and what ``fit --from``
  proposes first;
- ``goal_kept``: whether #1 keeps the launch's max-model-len and concurrency
  (null when there is nothing to cure).
"""

from __future__ import annotations

import enum
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from oomguard.check.context import CheckContext, CheckOptions, build_check_context
from oomguard.check.finding import Finding, Severity
from oomguard.check.goal import findings_for_fix, goal_fixes, options_to_dict
from oomguard.check.fixer import FixResult, fix_launch
from oomguard.check.lenient import (
    LaunchRead,
    read_command,
    read_file,
    read_script,
    read_yaml_text,
)
from oomguard.check.registry import RunResult, run_rules

SCHEMA_VERSION = 1
COVERAGE_RULE = "OG001"  # rules-not-run: makes the exit non-zero even without --strict


class ExitCode(enum.IntEnum):
    """The exit codes every oomguard command shares."""

    CLEAN = 0
    FINDINGS = 1  # errors, or warnings with --strict
    BAD_INPUT = 2
    INCOMPLETE = 3  # rules that could not run (OG001): never a silent "no findings"


@dataclass
class CheckReport:
    ctx: CheckContext
    result: RunResult
    fix: FixResult | None
    notes: list[str] = field(default_factory=list)
    goal_fixes: list = field(default_factory=list)  # oomguard.fit.goalfix.Option, ranked; #1 is what --fix applies

    @property
    def findings(self) -> list[Finding]:
        return self.result.findings

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.WARNING]

    @property
    def incomplete(self) -> bool:
        """Memory rules could not run (OG001): the result is not a clean bill of health."""
        return any(f.rule == COVERAGE_RULE for f in self.findings)

    def exit_code(self, strict: bool = False) -> ExitCode:
        if self.errors or (strict and self.warnings):
            return ExitCode.FINDINGS
        if self.incomplete:
            return ExitCode.INCOMPLETE
        return ExitCode.CLEAN

    @property
    def fixed_text(self) -> str | None:
        if self.fix is None or not self.fix.changed:
            return None
        return self.fix.text

    def fixed_path(self) -> str | None:
        path = self.ctx.launch.path
        if not path:
            return None
        p = Path(path)
        if self.ctx.launch.kind == "manifest":  # the corrected vllm command, to carry into the manifest
            return str(p.with_name(f"{p.stem}.fixed.sh"))
        return str(p.with_name(f"{p.stem}.fixed{p.suffix}"))

    def to_dict(self) -> dict:
        plan = self.ctx.plan
        fixed = self.fixed_text
        d = {
            "schema_version": SCHEMA_VERSION,
            "findings": [f.to_dict() for f in self.findings],
            "fixed_command": fixed,
            "plan": plan.to_dict() if plan is not None else None,
            "vllm_version": self.ctx.release.version,
            "launch": {"kind": self.ctx.launch.kind, "path": self.ctx.launch.path, "model": self.ctx.launch.model},
            "summary": {"errors": len(self.errors), "warnings": len(self.warnings), "info": len(self.findings) - len(self.errors) - len(self.warnings)},
            "fixed_form": self.ctx.launch.kind if fixed is not None else None,
            "diff": self.fix.diff(self.fixed_path()) if fixed is not None else None,
            "fixed_check": None,
            "skipped_rules": dict(self.result.skipped),
            "complete": not self.incomplete,
            "ignored": [f.rule for f in self.result.ignored],
            "notes": list(self.notes),
            "coverage": _coverage(self.ctx),
            "goal_fixes": options_to_dict(self.ctx, self.goal_fixes),
            "goal_kept": (self.goal_fixes[0].keeps_goal if self.goal_fixes else None),
            "host_ram": _host_ram(self.ctx),
        }
        if fixed is not None:
            d["fixed_check"] = {
                "errors": [f.rule for f in self.fix.remaining],
                "starts": self.fix.starts,
                "rounds": self.fix.rounds,
                "followups": [f.to_dict() for f in self.fix.followups],
                "notes": list(self.fix.notes),
            }
        return d


def _generic_note(model) -> str | None:
    """The generic path's mark, for the notes: the memory rules ran on estimates no adapter checked."""
    from oomguard.model.coverage import mark

    m = mark(model) if model is not None else None
    if not m:
        return None
    return (f"{m}: the memory rules ran on the generic path's estimates ({'; '.join(model.assumptions)}); "
            "the plan's coverage.ranges give the measured range of each (docs/models.md)")


def _coverage(ctx) -> dict | None:
    """The plan's coverage object; without a plan, the model's level alone."""
    from oomguard.model.coverage import coverage_dict, mark

    if ctx.plan is not None:
        return coverage_dict(ctx.plan)
    m = ctx.model
    if m is None:
        return {"level": "refused", "checked": ctx.model_note} if ctx.model_unsupported else None
    detail = m.coverage_detail or {}
    out = {"level": detail.get("level") or m.coverage, "model_type": m.model_type, "architecture": m.architecture,
           "checked": detail.get("checked", "")}
    if m.coverage == "generic":
        out.update(mark=mark(m), assumptions=list(m.assumptions))
    return out


def _host_ram(ctx) -> dict | None:
    """The host-RAM model's summary, the same object `oomguard host --format json` prints."""
    from oomguard.check.rules.host import host_ram_json

    try:
        return host_ram_json(ctx)
    except (ValueError, TypeError):
        return None


def read_target(*, path: str | None = None, command: list[str] | None = None, flags: list[str] | None = None, model: str | None = None, version: str | None = None) -> LaunchRead:
    """The launch, leniently: a file, a command after ``--``, or bare vLLM flags."""
    from oomguard.errors import InputError

    if path:
        read = read_file(path, version=version)
        if flags:
            # vLLM flags given next to a file override it, as on the command line
            extra = read_command(["vllm serve " + shlex.quote(read.launch.model or model or "MODEL") + " " + shlex.join(flags)], version=version)
            read.launch.flags.update(extra.launch.flags)
            read.problems.extend(extra.problems)
        return read
    if command:
        text = command[0] if len(command) == 1 else shlex.join(command)
        return read_command([text], version=version)
    if flags or model:
        words = list(flags or [])
        if model is None:
            raise InputError("nothing to check: give a launch file, a command after --, or --model with vLLM flags")
        return read_command(["vllm serve " + shlex.quote(model) + (" " + shlex.join(words) if words else "")], version=version)
    raise InputError("nothing to check: give a launch file, a command after --, or --model with vLLM flags")


def reread(read: LaunchRead, text: str, version: str | None) -> LaunchRead:
    """Read a corrected text in the original's form."""
    if read.launch.kind == "yaml":
        return read_yaml_text(text, path=read.launch.path, version=version)
    out = read_script(text, path=read.launch.path, version=version)
    out.launch.kind = read.launch.kind
    return out


def check_read(read: LaunchRead, options: CheckOptions, *, ignore: Iterable[str] = (), fix: bool = True) -> CheckReport:
    ignore = list(ignore)
    ctx = build_check_context(read, options)
    result = run_rules(ctx, ignore)
    notes = list(ctx.notes) + list(read.launch.notes)
    if ctx.model is None and ctx.model_note and not result.skipped:
        notes.append(ctx.model_note)
    generic = _generic_note(ctx.model)
    if generic:
        notes.insert(0, generic)
    if ctx.plan_error:
        notes.append(f"the launch could not be planned: {ctx.plan_error}")
    fx = None
    if fix:

        def rebuild(text: str):
            r2 = reread(read, text, options.version)
            c2 = build_check_context(r2, options)
            return c2, run_rules(c2, ignore)

        goal = goal_fixes(ctx, result.findings)
        fx = fix_launch(ctx, findings_for_fix(ctx, result.findings, goal), rebuild=rebuild)
        return CheckReport(ctx, result, fx, notes, goal)
    return CheckReport(ctx, result, fx, notes)


def check_target(options: CheckOptions, *, path: str | None = None, command: list[str] | None = None, flags: list[str] | None = None, ignore: Iterable[str] = (), fix: bool = True) -> CheckReport:
    read = read_target(path=path, command=command, flags=flags, model=options.model, version=options.version)
    if options.version is None:
        from dataclasses import replace

        from oomguard.check.context import image_version

        tagged = image_version(read.launch.program)
        if tagged is not None:  # the container's own release decides the flags
            options = replace(options, version=tagged)
            read = read_target(path=path, command=command, flags=flags, model=options.model, version=tagged)
    return check_read(read, options, ignore=ignore, fix=fix)
