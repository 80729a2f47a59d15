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
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data"
WEIGHTS_FILE = DATA / "diagnose_weights.json"
PRIORS_FILE = DATA / "diagnose_priors.json"


@dataclass(frozen=True)
class Weights:
    classes: tuple[str, ...]
    bias: dict[str, float]
    features: dict[str, dict[str, float]]  # sparse: feature -> class -> weight
    temperature: float = 1.0
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "bias": self.bias, "temperature": self.temperature,
                "features": self.features, "meta": self.meta}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Weights:
        classes = tuple(data["classes"])
        bias = {c: float(data.get("bias", {}).get(c, 0.0)) for c in classes}
        features = {str(f): {str(c): float(w) for c, w in row.items() if c in classes}
                    for f, row in data.get("features", {}).items()}
        return cls(classes, bias, features, float(data.get("temperature", 1.0)), dict(data.get("meta", {})))


@lru_cache(maxsize=4)
def load(path: str | None = None) -> Weights:
    """The shipped weights (or ``path``); the priors when no fitted file exists yet."""
    target = Path(path) if path else WEIGHTS_FILE
    if not target.exists() and path is None:
        target = PRIORS_FILE
    with open(target, encoding="utf-8") as fh:
        return Weights.from_dict(json.load(fh))


@dataclass
class Scores:
    logits: dict[str, float]
    probs: dict[str, float]
    ranked: list[str]

    def contribution(self, weights: Weights, feature: str, cls: str) -> float:
        return weights.features.get(feature, {}).get(cls, 0.0)


def score(features: set[str] | frozenset[str], weights: Weights, *, classes: tuple[str, ...] | None = None) -> Scores:
    """Scores and probabilities over ``classes`` (default: all) for one report's feature set."""
    allowed = classes or weights.classes
    logits = {c: weights.bias.get(c, 0.0) for c in allowed}
    for f in features:
        row = weights.features.get(f)
        if not row:
            continue
        for c, w in row.items():
            if c in logits:
                logits[c] += w
    t = weights.temperature if weights.temperature > 0 else 1.0
    top = max(logits.values())
    exps = {c: math.exp((v - top) / t) for c, v in logits.items()}
    total = sum(exps.values())
    probs = {c: e / total for c, e in exps.items()}
    ranked = sorted(probs, key=lambda c: (-probs[c], c))
    return Scores(logits, probs, ranked)
