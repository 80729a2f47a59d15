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

from oomguard.check.context import CheckContext, CheckOptions, build_check_context
from oomguard.check.finding import Finding, Severity
from oomguard.check.goal import findings_for_fix, goal_fixes, options_to_dict
from oomguard.check.fixer import FixResult, fix_launch
from oomguard.check.registry import RunResult, run_rules
from oomguard.inputs.launch import Launch
from oomguard.records import field, record

SCHEMA_VERSION = 1
COVERAGE_RULE = "OG001"  # rules-not-run: makes the exit non-zero even without --strict


class ExitCode(enum.IntEnum):
    """The exit codes every oomguard command shares."""

    CLEAN = 0
    FINDINGS = 1  # errors, or warnings with --strict
    BAD_INPUT = 2
    INCOMPLETE = 3  # rules that could not run (OG001): never a silent "no findings"


@record
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
    def refused_by(self) -> list[Finding]:
        """Error findings that foretell vLLM refusing the command line itself (its argument parser or
        config validation) before any memory is planned: the launch does not start, whatever the plan says."""
        from oomguard.check.registry import get_rule
        from oomguard.model.failures import FailureClass

        out = []
        for f in self.errors:
            rule = get_rule(f.rule)
            if rule is not None and FailureClass.BAD_ARGUMENT.value in rule.predicts:
                out.append(f)
        return out

    @property
    def predicted_start(self) -> bool | None:
        """The verdict: the memory plan's, unless vLLM refuses the command line first."""
        plan = self.ctx.plan
        if plan is None:
            return None
        return plan.starts and not self.refused_by

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
        return fixed_path_for(self.ctx.launch)

    def to_dict(self) -> dict:
        plan = self.ctx.plan
        fixed = self.fixed_text
        d = {
            "schema_version": SCHEMA_VERSION,
            "findings": [f.to_dict() for f in self.findings],
            "fixed_command": fixed,
            "plan": plan.to_dict() if plan is not None else None,
            "starts": self.predicted_start,
            "refused_by": [f.rule for f in self.refused_by],
            "vllm_version": self.ctx.release.version,
            "launch": {"kind": self.ctx.launch.kind, "path": self.ctx.launch.path, "model": self.ctx.launch.model,
                       "name": self.ctx.launch.name, "read": self.ctx.launch.to_dict()},
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


def fixed_path_for(launch: Launch) -> str | None:
    """Where ``--fix`` writes the corrected launch: ``NAME.fixed.EXT`` beside it, in its own format
    (None for a launch from the command line or a pipe)."""
    from oomguard.inputs import files

    path = launch.path
    if not path or files.is_named_stream(path) or path == "<stdin>":
        return None
    from pathlib import Path

    p = Path(path)
    return str(p.with_name(f"{p.stem}.fixed{p.suffix}"))


def read_targets(*, path: str | None = None, command: list[str] | None = None, flags: list[str] | None = None,
                 model: str | None = None, version: str | None = None) -> list[Launch]:
    """The launches, leniently: a file (``-``, ``/dev/fd/N``; every launch it holds), a command after
    ``--``, or bare vLLM flags."""
    from oomguard.errors import InputError
    from oomguard.inputs.reader import read_command, read_launches

    if path:
        launches = read_launches(path, version=version, lenient=True)
        if flags:
            for launch in launches:
                # vLLM flags given next to a file override it, as on the command line
                extra = read_command(["vllm serve " + shlex.quote(launch.model or model or "MODEL") + " " + shlex.join(flags)],
                                     version=version or launch.version, lenient=True)
                launch.flags.update(extra.flags)
                launch.sites.update(extra.sites)
                launch.problems.extend(extra.problems)
        return launches
    if command:
        text = command[0] if len(command) == 1 else shlex.join(command)
        return [read_command([text], version=version, lenient=True)]
    if flags or model:
        words = list(flags or [])
        if model is None:
            raise InputError("nothing to check: give a launch file, a command after --, or --model with vLLM flags")
        return [read_command(["vllm serve " + shlex.quote(model) + (" " + shlex.join(words) if words else "")],
                             version=version, lenient=True)]
    raise InputError("nothing to check: give a launch file, a command after --, or --model with vLLM flags")


def read_target(*, path: str | None = None, command: list[str] | None = None, flags: list[str] | None = None,
                model: str | None = None, version: str | None = None) -> Launch:
    """The one launch of the target (``PATH#NAME`` picks one of several)."""
    from oomguard.errors import InputError
    from oomguard.inputs import files
    from oomguard.inputs.reader import short_name

    launches = read_targets(path=path, command=command, flags=flags, model=model, version=version)
    if len(launches) > 1:
        names = ", ".join(x.name or "?" for x in launches)
        raise InputError(f"{len(launches)} vLLM launches here ({names}): name one as {path}#{short_name(launches[0]) or 'NAME'}",
                         file=files.display(path or ""))
    return launches[0]


def reread(launch: Launch, text: str, version: str | None) -> Launch:
    """Read a corrected text in the original's form (the same launch of a file holding several)."""
    from oomguard.errors import InputError
    from oomguard.inputs.command import parse_config_yaml, parse_script

    if launch.kind == "yaml":
        return parse_config_yaml(text, path=launch.path, version=version, lenient=True)
    if launch.kind == "manifest":
        from oomguard.inputs.manifests import read_manifests  # its YAML reader, for manifests only

        again = [x for x in read_manifests(text, path=launch.path or "", version=version, lenient=True) if x.name == launch.name]
        if len(again) != 1:
            raise InputError(f"the corrected manifest no longer holds {launch.name}", file=launch.path)
        return again[0]
    return parse_script(text, path=launch.path, version=version, lenient=True, kind=launch.kind)


def check_read(launch: Launch, options: CheckOptions, *, ignore: Iterable[str] = (), fix: bool = True) -> CheckReport:
    ignore = list(ignore)
    ctx = build_check_context(launch, options)
    result = run_rules(ctx, ignore)
    notes = list(ctx.notes) + list(launch.notes)
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
            r2 = reread(launch, text, options.version)
            c2 = build_check_context(r2, options)
            return c2, run_rules(c2, ignore)

        goal = goal_fixes(ctx, result.findings)
        fx = fix_launch(ctx, findings_for_fix(ctx, result.findings, goal), rebuild=rebuild)
        return CheckReport(ctx, result, fx, notes, goal)
    return CheckReport(ctx, result, fx, notes)


def check_target(options: CheckOptions, *, path: str | None = None, command: list[str] | None = None, flags: list[str] | None = None, ignore: Iterable[str] = (), fix: bool = True) -> CheckReport:
    """Check the one launch of a target (``PATH#NAME`` picks one of a file holding several)."""
    launch = read_target(path=path, command=command, flags=flags, model=options.model, version=options.version)
    return check_read(launch, options, ignore=ignore, fix=fix)


@record
class CheckRun:
    """``check`` over every launch of a target: one report per launch, and one corrected file.

    A file with several launches (Helm values with two modelSpecs, a manifest with two vLLM
    containers) is fixed launch by launch on the same text, so ``fixed_text`` holds every fix."""

    reports: list[CheckReport]
    original: str | None = None
    fixed: str | None = None

    @property
    def single(self) -> CheckReport | None:
        return self.reports[0] if len(self.reports) == 1 else None

    @property
    def findings(self) -> list[Finding]:
        return [f for r in self.reports for f in r.findings]

    @property
    def fixed_text(self) -> str | None:
        if len(self.reports) == 1:
            return self.reports[0].fixed_text
        return self.fixed if self.fixed is not None and self.fixed != self.original else None

    def fixed_path(self) -> str | None:
        return self.reports[0].fixed_path()

    def exit_code(self, strict: bool = False) -> ExitCode:
        codes = [r.exit_code(strict) for r in self.reports]
        if ExitCode.FINDINGS in codes:
            return ExitCode.FINDINGS
        if ExitCode.INCOMPLETE in codes:
            return ExitCode.INCOMPLETE
        return ExitCode.CLEAN

    def diff(self) -> str | None:
        if self.fixed_text is None:
            return None
        if len(self.reports) == 1:
            return self.reports[0].fix.diff(self.fixed_path())
        return FixResult("file", self.original or "", self.fixed or "", self.reports[0].ctx.launch.path).diff(self.fixed_path())

    def to_dict(self) -> dict:
        if len(self.reports) == 1:
            return self.reports[0].to_dict()
        per = [r.to_dict() for r in self.reports]
        findings = []
        for r, d in zip(self.reports, per):
            for f in d["findings"]:
                findings.append({**f, "launch": r.ctx.launch.name})
        errors = sum(d["summary"]["errors"] for d in per)
        warnings = sum(d["summary"]["warnings"] for d in per)
        return {
            "schema_version": SCHEMA_VERSION,
            "findings": findings,
            "fixed_command": self.fixed_text,
            "fixed_form": self.reports[0].ctx.launch.kind if self.fixed_text is not None else None,
            "diff": self.diff(),
            "summary": {"errors": errors, "warnings": warnings, "info": len(findings) - errors - warnings},
            "complete": all(d["complete"] for d in per),
            "launches": per,
        }


def check_run(options: CheckOptions, *, path: str | None = None, command: list[str] | None = None, flags: list[str] | None = None,
              ignore: Iterable[str] = (), fix: bool = True) -> CheckRun:
    """Check every launch of a target; with several, the fixes are applied one after the other to one text."""
    launches = read_targets(path=path, command=command, flags=flags, model=options.model, version=options.version)
    if len(launches) == 1:
        return CheckRun([check_read(launches[0], options, ignore=ignore, fix=fix)])
    original = launches[0].text
    text = original
    reports = []
    for launch in launches:
        current = reread(launch, text, options.version) if fix and text != original else launch
        rep = check_read(current, options, ignore=ignore, fix=fix)
        if rep.fixed_text is not None:
            text = rep.fixed_text
        reports.append(rep)
    return CheckRun(reports, original, text)
