"""From cues to verdicts: every class scored on all the evidence, the best one with a calibrated confidence.

``features.extract`` turns the parsers' signals and report cues into named binary features, each with
the line that carried it; ``scoring.score`` weighs them for every class at once (a cue bears on every
class it has a weight for) and gives calibrated probabilities. The verdict is the best class; other
classes follow when they are likely enough *and* rest on an error line of their own (a kernel kill
beside a CUDA OOM are two failures). The cues that decided each verdict (feature, weight, file:line)
are kept on it for ``--explain`` and the JSON.

"none" only when no cue states a failure (no anchor). A report that rests on people's wording only
(a paraphrase, a fragment in prose) keeps its class at a confidence of at most ``PARAPHRASE_CAP``.
"""

from __future__ import annotations

from oomguard.diagnose import features as feat
from oomguard.diagnose import phase_facts
from oomguard.diagnose import scoring
from oomguard.diagnose.classes import FailureClass as FC
from oomguard.diagnose.classes import Phase
from oomguard.diagnose.context import Context
from oomguard.diagnose.events import Evidence, SignalEvent, Verdict
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.parsers.cues import FAILURE_STATEMENTS, cue_name
from oomguard.records import record

MAX_EVIDENCE = 6
MAX_VERDICTS = 4
# A second class is reported when an error line of its own (a weight of at least STRONG_ANCHOR) supports it
# and it is at least SECONDARY_MIN likely once the classes before it are set aside.
STRONG_ANCHOR = 3.5
SECONDARY_MIN = 0.5
# Words, not vLLM messages (parsers/paraphrase.py): at most this sure, however clear the sentence. The shipped
# cap is FITTED on the leave-one-batch-out verdicts of that tier (``Weights.paraphrase_cap``); this is the default.
PARAPHRASE_CAP = 0.5
_PROSE_ANCHORS = frozenset({"sig:oom-prose", "sig:host-prose", "sig:kv-prose"})
_WORD_PREFIXES = ("para:", "words:", "hint:", "fail:")
# Evidence that something failed without saying what (issue 16: how specific the matched evidence is): a Python
# exception oomguard has no class for, an HTTP client's exception, the engine's death notice, a keyword a call did not
# take, a traceback without its error line; and what is read about such an error (who raised it, where it stopped).
# A class that rests on these alone is tier "generic", its confidence at most ``Weights.generic_cap``.
_GENERIC_ANCHORS = frozenset({"sig:generic-exception", "sig:client-exception", "sig:engine-died", "sig:api-mismatch",
                              "fail:traceback"})
_GENERIC_PREFIXES = ("exc:", "raised:", "paste-frame:", "cut-phase:", "engine:")
GPU_OOM_CLASSES = (FC.WEIGHTS_OOM, FC.PROFILE_OOM, FC.CUDAGRAPH_OOM, FC.RUNTIME_OOM)
# Below this p(phase | GPU OOM) the phase is open: the verdict says what would settle it.
SURE_PHASE = 0.8
# The phase cues listed as deciding one (the largest margins over the next phase).
MAX_PHASE_CUES = 4
_SETTLE = {
    "gpu-oom": "the log lines before the error (vLLM's 'Loading weights', 'Model loading took', 'Capturing CUDA "
               "graphs', request lines) or the whole traceback would settle the phase; --model and --gpu let oomguard "
               "compare the weights with the GPU",
}


@record
class Candidate:
    """One error line's share of a verdict, in the shape the fix builders read (``fixes_*``)."""

    cls: FC
    confidence: float
    event: SignalEvent
    reason: str
    cause: str | None = None
    words: bool = False


def classify(col: Collector, ctx: Context, weights: scoring.Weights | None = None) -> list[Verdict]:
    """All verdicts, most likely first (fixes are added by ``fixes.attach_fixes``)."""
    weights = weights or scoring.load()
    cues = feat.extract(col, ctx)
    anchors = [c for c in cues if c.anchor]
    if not anchors:
        return []
    found = {c.feature for c in cues}
    served = any(p >= Phase.READY for p in col.paste_phase.values()) or {
        cue_name("words:server-works"), cue_name("comp:client-app")} <= found or bool(REQUEST_LEVEL & found)
    if all(c.feature.startswith("fail:") or c.feature in FAILURE_STATEMENTS for c in anchors) and served \
            and not _failed_serving(col, anchors):
        # Complaints in words about a server that came up and answered (a 404, the output's quality), or that the
        # reporter says works while a client of it (a platform, a front end) failed: the server itself did not fail.
        return []
    active = {c.feature for c in cues}
    scores = scoring.score(active, weights)
    chosen, confidence = _choose(scores, active, anchors, weights, cues)
    # The class rests on people's wording when the cues that are words (paraphrases, phase words, "another
    # process holds the GPU") decide it: without them there is no anchor left, or another class wins.
    plain = {f for f in active if not _is_words(f)}
    if not any(not _is_words(c.feature) for c in anchors):
        words_only = True
    else:
        words_only = scoring.score(plain, weights).ranked[0] != scores.ranked[0]
    # Likewise the class rests on a generic exception when, without the generic cues, no specific error line is left
    # (a vLLM message, a signature the parsers know), or another class wins.
    generic_only = False
    if not words_only:
        if not any(not _is_words(c.feature) and not _is_generic(c.feature) for c in anchors):
            generic_only = True
        else:
            specific = {f for f in active if not _is_generic(f)}
            generic_only = scoring.score(specific, weights).ranked[0] != scores.ranked[0]
    tier = "paraphrase" if words_only else "generic" if generic_only else "message"
    verdicts = [_verdict(FC(cls), confidence[cls], scores, cues, anchors, weights, ctx, tier, col)
                for cls in chosen]
    return verdicts


# Cues that say requests reached a running server: vLLM's record of one it aborted, a client's read timeout (the
# server had accepted the connection; vLLM's API server listens only once the engine is up).
REQUEST_LEVEL = frozenset({cue_name("serve:aborted"), cue_name("client:read-timeout")})
# Cues that say the server failed while it served: it answered a request with a 5xx (parsers/cues.py).
SERVING_FAILURES = frozenset({cue_name("serve:5xx"), cue_name("client:server-error")})


def _failed_serving(col: Collector, anchors: list[feat.Cue]) -> bool:
    """The server came up and then failed: a 5xx answer, or an error record after its ready / serving line
    (``Collector.served_failure``), not only words about it."""
    return col.served_failure is not None or any(c.feature in SERVING_FAILURES for c in anchors)


def _choose(scores: scoring.Scores, active: set[str], anchors: list[feat.Cue], weights: scoring.Weights,
            cues: list[feat.Cue]) -> tuple[list[str], dict[str, float]]:
    """The best class, then each other failure in the same inputs, with their confidences."""
    chosen = [scores.ranked[0]]
    confidence = {chosen[0]: scores.probs[chosen[0]]}
    for cls in scores.ranked[1:]:
        if len(chosen) >= MAX_VERDICTS:
            break
        # Another failure in the same inputs (a kernel kill beside a KV error): a signature error line of its own,
        # which weighs more for it than for the classes already chosen, and likely once those are set aside. A line
        # weighs with the cues read from it (a GPU OOM's anchor is shared by its family; its own traceback frames
        # and logged phase are what make it a profile-run OOM).
        own = [c for c in anchors if _line_w(weights, cues, c, cls) >= STRONG_ANCHOR
               and all(_line_w(weights, cues, c, cls) > _line_w(weights, cues, c, k) for k in chosen)]
        if not own:
            continue
        rest = scoring.score(active, weights, classes=tuple(c for c in weights.classes if c not in chosen))
        if rest.ranked[0] == cls and rest.probs[cls] >= SECONDARY_MIN:
            chosen.append(cls)
            confidence[cls] = min(rest.probs[cls], confidence[chosen[0]])
    return chosen, confidence


def _line_w(weights: scoring.Weights, cues: list[feat.Cue], anchor: feat.Cue, cls: str) -> float:
    """What an anchor's error line weighs for ``cls``: its own feature, with the cues read from the same event."""
    if anchor.event is None:
        return _w(weights, anchor.feature, cls)
    return sum(_w(weights, c.feature, cls) for c in {c.feature: c for c in cues if c.event is anchor.event}.values())


def _is_words(feature: str) -> bool:
    return feature.startswith(_WORD_PREFIXES) or feature in _PROSE_ANCHORS or feature == "paste:coresident"


def _is_generic(feature: str) -> bool:
    return feature in _GENERIC_ANCHORS or feature.startswith(_GENERIC_PREFIXES)


def _w(weights: scoring.Weights, feature: str, cls: str) -> float:
    return weights.features.get(feature, {}).get(cls, 0.0)


def _verdict(cls: FC, prob: float, scores: scoring.Scores, cues: list[feat.Cue], anchors: list[feat.Cue],
             weights: scoring.Weights, ctx: Context, tier: str,
             collector: Collector | None = None) -> Verdict:
    def w(c: feat.Cue) -> float:
        return weights.features.get(c.feature, {}).get(cls.value, 0.0)

    words_only = tier == "paraphrase"
    conf = min(prob, weights.paraphrase_cap) if words_only else min(prob, weights.generic_cap) \
        if tier == "generic" else prob
    # The error lines behind this class: those whose own cues weigh for it (all anchors when none does).
    by_event: dict[int, float] = {}
    for c in cues:
        if c.event is not None:
            by_event[id(c.event)] = by_event.get(id(c.event), 0.0) + w(c)
    events = []
    seen = set()
    for c in anchors:
        if c.event is not None and id(c.event) not in seen and by_event.get(id(c.event), 0.0) > 0:
            seen.add(id(c.event))
            events.append(c.event)
    if not events:
        events = list({id(c.event): c.event for c in anchors if c.event is not None}.values())
    active = {c.feature for c in cues}
    cause = _cause(active, ctx)
    top_cue = max((c for c in cues if w(c) > 0), key=w, default=None)
    reason = "message" if top_cue is not None and top_cue.feature.startswith("sig:") and w(top_cue) >= 4 else (
        top_cue.why if top_cue is not None else "scored cues")
    members = []
    for ev in events:
        own = max((c for c in cues if c.event is ev and w(c) > 0), key=w, default=None)
        members.append(Candidate(cls, conf, ev, reason if own is None or own is top_cue else own.why, cause,
                                 words=words_only))
    best = max(events, key=lambda e: by_event.get(id(e), 0.0)) if events else None
    evidence: list[Evidence] = []
    keys = set()
    for c in sorted((c for c in cues if c.file != "(context)"), key=lambda c: -w(c)):
        if w(c) <= 0 and evidence:
            break
        key = (c.file, c.line)
        if key in keys:
            continue
        keys.add(key)
        evidence.append(Evidence(c.file, c.line, c.text))
        if len(evidence) >= MAX_EVIDENCE:
            break
    evidence.sort(key=lambda e: (e.file, e.line))
    verdict = Verdict(cls=cls, confidence=conf, summary="", evidence=evidence,
                      phase=best.phase if best is not None else Phase.UNKNOWN,
                      first_seq=min((e.seq for e in events), default=0))
    verdict.tier = tier
    verdict.component = next((c.feature.split(":", 1)[1] for c in cues if c.feature.startswith("raised:")
                              and (best is None or c.event is best)), None)
    verdict.cues = _explain(cls, cues, weights)
    verdict.alternatives = [(c, round(scores.probs[c], 3)) for c in scores.ranked[:4] if c != cls.value]
    if scores.family is not None and scores.phase is not None and cls.value in scores.phase:
        verdict.family = (round(scores.family, 3), [(c, round(p, 3)) for c, p in
                                                    sorted(scores.phase.items(), key=lambda kv: (-kv[1], kv[0]))])
        verdict.phase_decided_by = _phase_why(cls.value, scores.phase, active, weights, cues)
    if cls in GPU_OOM_CLASSES and ("oom:no-phase" in active or (scores.phase or {}).get(cls.value, 1.0) < SURE_PHASE):
        # the phase rests on the rest of the report: say which missing facts would decide it
        numbers = next((e.numbers for e in events if phase_facts.held_gib(e.numbers) is not None),
                       best.numbers if best is not None else None)
        verdict.settle = phase_facts.settle(active, numbers, ctx, collector) or _SETTLE["gpu-oom"]
    verdict._members = members  # type: ignore[attr-defined]  # read by fixes.attach_fixes, then dropped
    return verdict


def _phase_why(cls: str, phase: dict[str, float], active: set[str], weights: scoring.Weights,
               cues: list[feat.Cue]) -> list[dict]:
    """The phase cues that put ``cls`` ahead of the next most likely phase: each cue's weight for ``cls`` less its
    weight for that phase in the phase model (the margin it adds to the log-odds), largest first."""
    model = weights.phase
    rivals = [c for c in sorted(phase, key=lambda c: -phase[c]) if c != cls]
    if model is None or not rivals:
        return []
    rival = rivals[0]
    why = {c.feature: c.why for c in reversed(cues)}
    out = []
    for f in sorted(f for f in active if scoring.bears_on_phase(f)):
        row = model.features.get(f, {})
        margin = (row.get(cls, 0.0) - row.get(rival, 0.0)) / (model.temperature or 1.0)
        if abs(margin) >= 0.05:
            out.append({"feature": f, "margin": round(margin, 2), "against": rival, "why": why.get(f, f)})
    out.sort(key=lambda e: -e["margin"])
    return out[:MAX_PHASE_CUES] + [e for e in out[MAX_PHASE_CUES:] if e["margin"] < 0][-1:]


def _explain(cls: FC, cues: list[feat.Cue], weights: scoring.Weights) -> list[dict]:
    """The terms of the class's score: each cue once (its first line), largest weight first, then the bias."""
    out = []
    seen = set()
    for c in cues:
        if c.feature in seen:
            continue
        seen.add(c.feature)
        weight = weights.features.get(c.feature, {}).get(cls.value, 0.0)
        if weight == 0.0:
            continue
        entry = {"feature": c.feature, "weight": round(weight, 3), "why": c.why}
        if c.file != "(context)":
            entry.update(file=c.file, line=c.line, text=c.text[:200])
        out.append(entry)
    out.sort(key=lambda e: -abs(e["weight"]))
    bias = weights.bias.get(cls.value, 0.0)
    if bias:
        out.append({"feature": "(bias)", "weight": round(bias, 3), "why": "the class's base score"})
    return out


def _cause(active: set[str], ctx: Context) -> str | None:
    """What the fix builders key on (sampler, multimodal, batched tokens...), from the cues."""
    if active & {"frame:sampler", "paste-frame:sampler", "hint:sampler", "sig:sampler-warmup-oom"}:
        return "sampler"
    if "sig:swap-exhausted" in active:
        return "swap"
    if active & {"frame:kv-alloc", "paste-frame:kv-alloc"}:
        return "kv-allocation"
    if not ctx.text_only and active & {"frame:mm-encoder", "paste-frame:mm-encoder", "flag:multimodal"}:
        return "multimodal"
    if "flag:batched-tokens" in active:
        return "batched-tokens"
    if "flag:num-seqs" in active:
        return "num-seqs"
    if "flag:eager" in active:
        return "cudagraph"
    if not ctx.text_only and active & {"hint:multimodal"}:
        return "multimodal"
    if active & {"frame:logprobs", "paste-frame:logprobs", "req:logprobs"}:
        return "logprobs"
    tokens = ctx.arg("max_num_batched_tokens")
    if isinstance(tokens, (int, float)) and not isinstance(tokens, bool) and tokens >= 32768:
        return "batched-tokens"
    if "req:concurrency" in active:
        return "concurrency"
    return None
