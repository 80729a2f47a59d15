"""Evidence scoring: a weight per (feature, class), a score per class, a calibrated probability.

``score_c = bias_c + sum of weight[f][c] over the report's features f`` (features are binary: a cue is
present or not), then ``p = softmax(score / temperature)``. This is a multinomial logistic regression
over named features: every weight reads as "this cue, for this class, adds so much", and a verdict's
``cues`` list is exactly the terms of its score.

The weights are data (``src/oomguard/data/diagnose_weights.json``), read with the standard library
only. They are fitted by ``scripts/train_diagnose.py`` on the labelled corpus, regularised toward
hand-set priors (``src/oomguard/data/diagnose_priors.json``: strong cues such as vLLM's exact messages
start near-certain), and the temperature is fitted on leave-one-thread-out predictions so that a
confidence of 0.8 is right about 80 % of the time on reports the weights were not fitted on.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from oomguard.records import field, record

DATA = Path(__file__).resolve().parents[1] / "data"
WEIGHTS_FILE = DATA / "diagnose_weights.json"
PRIORS_FILE = DATA / "diagnose_priors.json"


# The classes a GPU out-of-memory error can be (its phase), and the anchors that say there is one.
PHASE_CLASSES: tuple[str, ...] = ("weights-oom", "startup-free-memory", "profile-oom", "cudagraph-oom", "runtime-oom")
GPU_OOM_ANCHORS = frozenset({"sig:cuda-oom", "sig:oom-prose", "para:oom-prose", "sig:allocator-failure"})
# Cue kinds that bear on when a GPU OOM happened (the phase model's inputs), and single cues besides them.
_PHASE_KINDS = ("frame:", "paste-frame:", "phase:", "paste-phase:", "hint:", "oom:", "size:", "flag:", "req:",
                "paste:")
# Of those, the ones that say nothing but the phase (with "req:"): without a GPU OOM they say nothing about an
# argparse error or a crash, and features.py leaves them out. One table, so the two lists cannot drift apart.
PHASE_ONLY = frozenset({"ctx:served", "ctx:ready", "ctx:weights-exceed-gpu", "ctx:weights-tight", "ctx:weights-fit",
                        "ctx:weights-small", "ctx:gpus-unused", "ctx:multimodal", "ctx:multimodal-large-gpu", "ctx:eager",
                        "words:startup", "words:loading", "words:after-load", "words:serving", "words:started-fine",
                        "words:profile", "words:capture"})
_PHASE_CUES = PHASE_ONLY | frozenset({"ctx:weights-above-budget", "ctx:util-above-default", "ctx:util-below-default",
                                      "ctx:max-len-set", "ctx:engine-v0", "ctx:tensor-parallel", "words:kv",
                                      "cfg:hybrid", "sig:load-oom", "sig:sampler-warmup-oom", "sig:kv-allocation-oom",
                                      "sig:startup-free-memory", "host:offload"})


def phase_only(feature: str) -> bool:
    return feature in PHASE_ONLY or feature.startswith("req:")


def bears_on_phase(feature: str) -> bool:
    return feature.startswith(_PHASE_KINDS) or feature in _PHASE_CUES


@record(frozen=True)
class PhaseModel:
    """p(phase | phase cues) for a report that holds a GPU OOM (see the module docstring)."""

    classes: tuple[str, ...]
    bias: dict[str, float]
    features: dict[str, dict[str, float]]
    temperature: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "bias": self.bias, "temperature": self.temperature,
                "features": self.features}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PhaseModel:
        classes = tuple(data["classes"])
        return cls(classes, {c: float(data.get("bias", {}).get(c, 0.0)) for c in classes},
                   {str(f): {str(c): float(w) for c, w in row.items() if c in classes}
                    for f, row in data.get("features", {}).items()}, float(data.get("temperature", 1.0)))

    def probs(self, features: set[str] | frozenset[str], allowed: tuple[str, ...],
              extra: dict[str, float] | None = None) -> dict[str, float]:
        logits = {c: self.bias.get(c, 0.0) + (extra.get(c, 0.0) if extra else 0.0) for c in self.classes if c in allowed}
        for f in features:
            for c, w in self.features.get(f, {}).items():
                if c in logits:
                    logits[c] += w
        return _softmax(logits, self.temperature)


@record(frozen=True)
class Weights:
    classes: tuple[str, ...]
    bias: dict[str, float]
    features: dict[str, dict[str, float]]  # sparse: feature -> class -> weight
    temperature: float = 1.0
    meta: dict[str, Any] = field(default_factory=dict)
    phase: PhaseModel | None = None
    # class -> flag -> how many labelled threads of that class were fixed by that flag (diagnose/fixes.rank_fixes)
    fix_votes: dict[str, dict[str, int]] = field(default_factory=dict)
    # The most a verdict that rests on people's wording (tier "paraphrase") may claim: FITTED on the
    # leave-one-batch-out verdicts of that tier (scripts/train_diagnose.py), 0.5 when the file has none.
    paraphrase_cap: float = 0.5
    # The most a verdict that rests on a generic exception (tier "generic": a Python exception oomguard has no class
    # for, a keyword a call did not take, a traceback without its error line) may claim: FITTED the same way on that
    # tier's verdicts; 1.0 (no cap) when the file has none.
    generic_cap: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        out = {"classes": list(self.classes), "bias": self.bias, "temperature": self.temperature,
               "features": self.features, "meta": self.meta}
        if self.phase is not None:
            out["phase"] = self.phase.to_dict()
        if self.fix_votes:
            out["fix_votes"] = self.fix_votes
        out["paraphrase_cap"] = self.paraphrase_cap
        out["generic_cap"] = self.generic_cap
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Weights:
        classes = tuple(data["classes"])
        bias = {c: float(data.get("bias", {}).get(c, 0.0)) for c in classes}
        features = {str(f): {str(c): float(w) for c, w in row.items() if c in classes}
                    for f, row in data.get("features", {}).items()}
        phase = PhaseModel.from_dict(data["phase"]) if data.get("phase") else None
        votes = {str(c): {str(f): int(n) for f, n in row.items()} for c, row in data.get("fix_votes", {}).items()}
        return cls(classes, bias, features, float(data.get("temperature", 1.0)), dict(data.get("meta", {})), phase,
                   votes, float(data.get("paraphrase_cap", 0.5)), float(data.get("generic_cap", 1.0)))


@lru_cache(maxsize=4)
def load(path: str | None = None) -> Weights:
    """The shipped weights (or ``path``); the priors when no fitted file exists yet."""
    target = Path(path) if path else WEIGHTS_FILE
    if not target.exists() and path is None:
        target = PRIORS_FILE
    with open(target, encoding="utf-8") as fh:
        return Weights.from_dict(json.load(fh))


@record
class Scores:
    logits: dict[str, float]
    probs: dict[str, float]
    ranked: list[str]
    phase: dict[str, float] | None = None  # p(phase | phase cues) when the phase model split a GPU OOM
    family: float | None = None  # p(a GPU-memory class) = the split mass, when the phase model split it

    def contribution(self, weights: Weights, feature: str, cls: str) -> float:
        return weights.features.get(feature, {}).get(cls, 0.0)


def _softmax(logits: dict[str, float], temperature: float) -> dict[str, float]:
    t = temperature if temperature > 0 else 1.0
    top = max(logits.values())
    exps = {c: math.exp((v - top) / t) for c, v in logits.items()}
    total = sum(exps.values())
    return {c: e / total for c, e in exps.items()}


def score(features: set[str] | frozenset[str], weights: Weights, *, classes: tuple[str, ...] | None = None,
          extra: dict[str, float] | None = None, phase_extra: dict[str, float] | None = None) -> Scores:
    """Scores and probabilities over ``classes`` (default: all) for one report's feature set; ``extra`` and
    ``phase_extra`` are terms added to the class scores and to the phase model's (the build-time evaluation of a
    text model, ``scripts/diagnose_text_model.py``; the shipped classifier passes none)."""
    allowed = classes or weights.classes
    logits = {c: weights.bias.get(c, 0.0) + (extra.get(c, 0.0) if extra else 0.0) for c in allowed}
    for f in features:
        row = weights.features.get(f)
        if not row:
            continue
        for c, w in row.items():
            if c in logits:
                logits[c] += w
    probs = _softmax(logits, weights.temperature)
    phase = mass = None
    if weights.phase is not None and GPU_OOM_ANCHORS & set(features):
        family = tuple(c for c in weights.phase.classes if c in probs)
        if family:
            # Two levels: p(class) = p(the GPU-memory family) x p(phase | family). The family's mass comes from the
            # main model (every cue), its split from the phase model (the cues that say when it happened). The
            # verdict is the best of these joint probabilities: deciding the family first (its best phase whenever
            # the mass beats every other class) was measured and lost records (docs/diagnose.md, "Deciding the
            # GPU-memory family").
            mass = sum(probs[c] for c in family)
            phase = weights.phase.probs({f for f in features if bears_on_phase(f)}, family, phase_extra)
            probs.update({c: mass * phase[c] for c in family})
    ranked = sorted(probs, key=lambda c: (-probs[c], c))
    return Scores(logits, probs, ranked, phase, mass)
