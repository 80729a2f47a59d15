"""For each verdict: a one-sentence summary, what the numbers say, and the flag edits that fix it.

Fixes are written as vLLM spells its flags. Where the log carries the numbers
(the estimated maximum model length, the GiB needed vs available, the free
memory at start, the Mamba block count) they become the fix values; where it
does not, the value is a conservative step from the current setting. The
builders live in ``fixes_memory`` and ``fixes_config``; this module picks one
per class.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from oomguard.diagnose.classes import FailureClass as FC
from oomguard.diagnose.context import Context
from oomguard.diagnose.events import Fix, Verdict
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.fixes_config import (
    NAMED_SETTING_CLASSES,
    _bad_arg,
    _config,
    _ima,
    _mamba,
    _max_len,
    _unknown,
    family_fixes,
    launch_levers,
    named_setting_fixes,
    reported_settings,
)
from oomguard.diagnose.fixes_env import _chat_template, _missing_dependency, _nccl, _ray
from oomguard.diagnose.fixes_memory import (
    _cudagraph,
    _host,
    _kv_small,
    _no_kv,
    _profile,
    _runtime,
    _startup_free,
    _weights,
)
from oomguard.diagnose.fixes_rank import FACT_FIRST, FAMILY, NAMED, PADDING, suggested_flags

# The builder's order is worth ALPHA / (position + 1) votes (a prior of pseudo-counts; position 1 is the second
# fix): one thread's vote moves a fix ahead of the one just before it at most, two or more move it further.
# Chosen by cross-validation (2 and 4 compared; 4 lets a single thread reorder less).
ALPHA = 4.0


def rank_fixes(fixes: list[Fix], votes: dict[str, int] | None, *, keep_first: bool = True) -> list[Fix]:
    """The builder's fixes reordered by the fixes that labelled threads of the class used (``votes``: flag -> threads,
    fitted by scripts/train_diagnose.py), the builder's order counting as ALPHA / (position + 1) votes.

    The builder proposes only fixes its facts support (a V0 launch without chunked prefill, a multimodal model...);
    the votes only say which of those users needed first. FITTED: the votes are counts over the labelled corpus.
    ``keep_first``: the first fix stays first (the report named a cause the builder's first fix answers); otherwise
    the votes order the first too (the builder's first is then its default order, not this report's facts)."""
    if not votes or len(fixes) < (3 if keep_first else 2):
        return fixes
    head = fixes[:1] if keep_first else []
    rest = fixes[len(head):]
    offset = len(head) + 1
    scored = [(math.log(votes.get(f.flag, 0) + ALPHA / (i + offset)), -i, f) for i, f in enumerate(rest)]
    return head + [f for _s, _i, f in sorted(scored, key=lambda t: (-t[0], -t[1]))]


def suggested_first(fixes: list[Fix], suggested: set[str]) -> list[Fix]:
    """A fix the builder proposed (its facts support it, with its value) that the report also suggests comes second,
    right after the first (the report's own facts), unless the second is already one the report suggests."""
    if len(fixes) < 3 or not suggested or fixes[1].flag in suggested:
        return fixes
    pick = next((f for f in fixes[2:] if f.flag in suggested), None)
    if pick is None:
        return fixes
    pick.chosen = "the report suggests this flag (moved up to second)"
    return [fixes[0], pick] + [f for f in fixes[1:] if f is not pick]


def attach_fixes(verdicts: list[Verdict], col: Collector, ctx: Context,
                 votes: dict[str, dict[str, int]] | None = None) -> None:
    from oomguard.diagnose.fixes_blend import blend
    from oomguard.diagnose.fixes_rank import rank_first

    votes = votes or {}
    for v in verdicts:
        members = getattr(v, "_members", [])
        _BUILDERS[v.cls](v, members, col, ctx)
        v.summary = _whole_sentence(v.summary)
        v.fix = _ordered(v, members, col, ctx, votes)

        def build(cls: FC, members: list[Any], col: Collector, ctx: Context, v: Verdict = v) -> list[Fix]:
            # a runner-up class's fixes, built and ordered the same way from the same lines
            alt = Verdict(cls=cls, confidence=0.0, summary="", evidence=v.evidence, phase=v.phase)
            _BUILDERS[cls](alt, members, col, ctx)
            return _ordered(alt, members, col, ctx, votes)

        # An uncertain class: the runner-up classes' fixes join (fixes_blend); a sure one keeps its own.
        v.fix = blend(v, build, members, col, ctx)
        v.fix = suggested_added(v, col, ctx)
        if len(v.fix) < 2:
            have = {f.flag for f in v.fix}
            v.fix += [f for f in reported_settings(v, members, col) if f.flag not in have][:2 - len(v.fix)]
        if not v.fix:
            v.fix = launch_levers(ctx)
            for f in v.fix:
                f.chosen = f"the launch sets it (no fix of the class or its runner-ups applies; {PADDING})"
        # The first fix is what a user runs: the fitted ranker may bring a better-supported candidate to the front.
        v.fix = rank_first(v, col, ctx, votes)
        if v.cls in _GPU_OOM and v.settle:
            v.summary += (" The phase is the most likely one from the rest of the report (no phase marker or "
                          f"traceback frame places the error): {v.settle}.")
        if hasattr(v, "_members"):
            del v._members  # type: ignore[attr-defined]


def _ordered(v: Verdict, members: list[Any], col: Collector, ctx: Context, votes: dict[str, dict[str, int]]) -> list[Fix]:
    """The builder's fixes of ``v`` (already in ``v.fix``) in their order: votes, families, named settings, the
    report's suggestion; each says why it is where it is (``Fix.chosen``)."""
    fact_led = _fact_led(v, members)
    class_votes = votes.get(v.cls.value) or {}
    if v.fix:
        v.fix[0].chosen = (FACT_FIRST if fact_led
                           else "the class's default first fix")
    # The first fix stays first when the report names what caused the failure (the sampler warm-up, the
    # multimodal encoder, prompt logprobs, the batched tokens...) or rests on vLLM's own message with its
    # numbers: the builder's first fix answers that. Otherwise the labelled threads' votes order all of them.
    fixes = rank_fixes(v.fix, class_votes, keep_first=fact_led)
    for f in fixes:
        n = class_votes.get(f.flag, 0)
        if n and not (f is v.fix[0] and fact_led):
            f.chosen = f"fixed {n} labelled {v.cls.value} thread(s) (fix votes)"
    # The configuration families' standard fixes go first (dtype on pre-Ampere cards, custom all-reduce...).
    family = [f for f in family_fixes(v, members, col, ctx) if f.flag not in {x.flag for x in fixes[:1]}]
    for f in family:
        f.chosen = FAMILY
    if family:
        fixes = family + [f for f in fixes if f.flag not in {x.flag for x in family}]
    if v.cls.value in NAMED_SETTING_CLASSES:
        # The setting the error names: first for a configuration error, after the class's own fixes otherwise.
        named = [f for f in named_setting_fixes(v, members, col) if f.flag not in {x.flag for x in fixes}]
        for f in named:
            f.chosen = NAMED
        fixes = (family + named + fixes[len(family):]) if v.cls == FC.CONFIG_ERROR else fixes + named
    fixes = suggested_first(fixes, suggested_flags(col))
    for f in fixes:
        if not f.chosen:
            f.chosen = f"proposed by the {v.cls.value} fix builder for this report's facts (its order)"
    return fixes


def suggested_added(v: Verdict, col: Collector, ctx: Context) -> list[Fix]:
    """A flag the report suggests changing that no fix names yet joins, second (after the first), with the standard
    step for that flag (fixes_blend.suggested_fix); one the builder already proposed was moved by suggested_first."""
    from oomguard.diagnose.fixes_blend import suggested_fix
    from oomguard.diagnose.parsers.cues import SUGGESTION_PREFIX

    have = {f.flag for f in v.fix}
    added = []
    for feature, hit in sorted(col.cues.items(), key=lambda kv: (kv[1].file, kv[1].line)):
        if not feature.startswith(SUGGESTION_PREFIX):
            continue
        flag = "--" + feature.removeprefix(SUGGESTION_PREFIX)
        if flag in have:
            continue
        fix = suggested_fix(flag, hit.text, v, col, ctx)
        if fix is not None:
            fix.chosen = f"the report suggests this flag ({hit.file}:{hit.line})"
            added.append(fix)
            have.add(flag)
    if not added:
        return v.fix
    return v.fix[:1] + added[:1] + v.fix[1:] + added[1:]


def _whole_sentence(summary: str) -> str:
    """A builder quotes the error line after a colon; a verdict read from words or frames can have no line
    (or an empty one) to quote: say so instead of ending on the colon."""
    text = summary.rstrip()
    if not text.endswith(":"):
        return summary
    return text.rstrip(":").rstrip() + " (the text does not show the error message itself; --explain lists the cues)."


_GPU_OOM = (FC.WEIGHTS_OOM, FC.PROFILE_OOM, FC.CUDAGRAPH_OOM, FC.RUNTIME_OOM)


def _fact_led(v: Verdict, members: list[Any]) -> bool:
    """Whether the builder's first fix follows this report's own facts (see attach_fixes), not its default order."""
    from oomguard.diagnose.remedy import cause_of

    # chunked prefill is proposed only for a V0 launch without it (V0 refuses fewer batched tokens than
    # max_model_len then): a fact of this launch, not the builder's default
    chunked = bool(v.fix) and v.fix[0].flag == "--enable-chunked-prefill"
    return v.cls not in _GPU_OOM or cause_of(members) is not None or chunked


_BUILDERS: dict[FC, Callable[[Verdict, list[Any], Collector, Context], None]] = {
    FC.WEIGHTS_OOM: _weights, FC.STARTUP_FREE_MEMORY: _startup_free, FC.PROFILE_OOM: _profile,
    FC.CUDAGRAPH_OOM: _cudagraph, FC.NO_KV_MEMORY: _no_kv, FC.KV_TOO_SMALL: _kv_small, FC.RUNTIME_OOM: _runtime,
    FC.HOST_OOM: _host, FC.ILLEGAL_MEMORY_ACCESS: _ima, FC.BAD_ARGUMENT: _bad_arg, FC.MAX_LEN_EXCEEDS_MODEL: _max_len,
    FC.CONFIG_ERROR: _config, FC.MAMBA_STATE_LIMIT: _mamba, FC.UNKNOWN: _unknown,
    FC.MISSING_DEPENDENCY: _missing_dependency, FC.CHAT_TEMPLATE_ERROR: _chat_template, FC.NCCL_ERROR: _nccl,
    FC.RAY_PLACEMENT_TIMEOUT: _ray,
}
