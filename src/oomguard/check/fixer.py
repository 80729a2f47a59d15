"""Apply a fix's flag edits to the launch in its own format, and show the diff.

The corrected launch is written the way the user wrote it: a script stays a script
(``check.fix_text``), a ``--config`` YAML stays that YAML, and a Deployment, a compose
file or Helm values get their own values patched in place, comments kept
(``check.manifest_fix``). Never another format.

Edits come from findings (``collect_edits``): errors first, one edit per flag;
``fix_launch`` applies them, re-reads the corrected text and re-checks it, and
repeats (a fix can reveal the next problem: a chunked budget lets the
max-model-len check run) until no new edit appears.
"""

from __future__ import annotations

from collections.abc import Iterable

from oomguard.check.finding import Edit, Finding, Severity
from oomguard.check.fix_text import ScriptFixer, YamlFixer
from oomguard.inputs.launch import Launch
from oomguard.records import field, record

MAX_ROUNDS = 5


def _key(e: Edit) -> tuple:
    if e.is_env:
        return ("env", e.flag)
    if e.dest:
        return ("dest", e.dest)
    return ("opt", e.replaces or e.flag)


def collect_edits(findings: Iterable[Finding], *, include_info: bool = False) -> list[Edit]:
    """The edits of error and warning findings (info fixes are suggestions), errors first;
    the first edit of a flag wins."""
    out: dict[tuple, Edit] = {}
    for f in sorted(findings, key=lambda x: x.severity.rank):
        if f.severity is Severity.INFO and not include_info:
            continue
        for e in f.fix:
            out.setdefault(_key(e), e)
    return list(out.values())


def merge_edits(old: list[Edit], new: list[Edit]) -> list[Edit]:
    """Later rounds win: they were computed on the corrected launch."""
    out = {_key(e): e for e in old}
    for e in new:
        out[_key(e)] = e
    return list(out.values())


@record
class FixResult:
    form: str
    original: str
    text: str
    path: str | None
    applied: list[Edit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    remaining: list[Finding] = field(default_factory=list)  # errors the corrected launch still has
    followups: list[Finding] = field(default_factory=list)  # problems the first fixes uncovered (and fixed)
    starts: bool | None = None
    plan: dict | None = None
    rounds: int = 0

    @property
    def changed(self) -> bool:
        return self.text != self.original

    def diff(self, fixed_path: str | None = None) -> str:
        a = self.original.splitlines(keepends=True)
        b = self.text.splitlines(keepends=True)
        for lines in (a, b):
            if lines and not lines[-1].endswith("\n"):
                lines[-1] += "\n"
        src = self.path or "command"
        import difflib  # only when a diff is printed

        return "".join(difflib.unified_diff(a, b, fromfile=src, tofile=fixed_path or (src + " (fixed)")))


# --------------------------------------------------------------------- driver


def apply_edits(launch: Launch, release, edits: list[Edit]) -> tuple[str, list[str]]:
    """The corrected launch text, in the launch's own format, and notes on edits that could not be
    applied in place."""
    if launch.kind == "manifest":
        from oomguard.check.manifest_fix import ManifestFixer

        fixer = ManifestFixer(launch, release)
    elif launch.kind == "yaml":
        fixer = YamlFixer(launch, release)
    else:
        carrier = launch.carrier
        if carrier is not None and not getattr(carrier, "editable", True) or any(
                w.start < 0 for w in (launch.command.words if launch.command else [])):
            return launch.text or "", ["the vLLM command is inside a shell string oomguard cannot edit in place; "
                                       "apply these edits by hand: " + "; ".join(e.describe() for e in edits)]
        fixer = ScriptFixer(launch, release, quote=getattr(carrier, "quote", "") if carrier is not None else "")
    notes: list[str] = []
    # removals first so that a rename's "set" can reuse a removed flag's place
    ordered = [e for e in edits if e.is_env] + [e for e in edits if not e.is_env and e.value is None] + [e for e in edits if not e.is_env and e.value is not None]
    renamed = {x.replaces for x in edits if x.value is not None and x.replaces}
    for e in ordered:
        if e.is_env:
            elsewhere = launch.env_from.get(e.flag)
            if elsewhere is not None:  # never a second definition beside the manifest's valueFrom
                notes.append(f"{e.flag} is set from {elsewhere.source} (make it {e.value} there)"
                             if e.value is not None else f"{e.flag} is set from {elsewhere.source} (remove it there)")
            elif not fixer.env(e):
                notes.append(f"set {e.flag}={e.value} in the environment of the server")
            continue
        if e.value is None:
            if e.replaces and e.replaces in renamed:
                continue  # a rename: the set below rewrites it in place
            fixer.remove(e)
            continue
        fixer.set(e)
    return fixer.finish(), notes


def fix_launch(ctx, findings: list[Finding], *, rebuild=None) -> FixResult | None:
    """Apply the findings' edits, re-check the corrected launch, and iterate.

    ``rebuild(text) -> (CheckContext, RunResult)`` re-reads and re-checks a
    corrected text (given by the caller, who knows the options).
    """
    read = ctx.launch
    if read.text is None:
        return None
    edits = collect_edits(findings)
    original = read.text
    result = FixResult(read.kind, original, original, read.path)
    if not edits:
        return result
    text = original
    rounds = 0
    ctx2 = res2 = None
    notes: list[str] = []
    followups: list[Finding] = []
    while rounds < MAX_ROUNDS:
        rounds += 1
        text, notes = apply_edits(read, ctx.release, edits)
        if rebuild is None:
            break
        ctx2, res2 = rebuild(text)
        more = collect_edits(res2.findings)
        known = {_key(x): x for x in edits}
        fresh = [e for e in more if known.get(_key(e)) != e]
        if not fresh:
            break
        fresh_keys = {_key(e) for e in fresh}
        for f in res2.findings:
            if any(_key(e) in fresh_keys for e in f.fix) and f.severity is not Severity.INFO:
                followups.append(f)
        edits = merge_edits(edits, fresh)
    result.text = text
    result.applied = edits
    result.notes = notes
    result.rounds = rounds
    result.followups = followups
    if res2 is not None:
        result.remaining = [f for f in res2.findings if f.severity is Severity.ERROR]
        plan = ctx2.plan if ctx2 is not None else None
        result.starts = plan.starts if plan is not None else None
        result.plan = plan.to_dict() if plan is not None else None
    return result
