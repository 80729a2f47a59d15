"""A learned text model beside diagnose's named cues: the report's own words, weighed per class (build-time only).

Not part of the shipped package (issue 16, fifth pass): measured twice, it never earned its place. On 645 records
(A01-C08) it gave +0.9 point leaving one batch out but nothing on the fresh C07 / C08 and moved two hand-checked
shapes; dormant code in the package is a cost, so it lives here beside its trainer, and
``scripts/train_diagnose.py --text-lambdas none,10 --cv-by both`` measures it (the cue model alone against the cue
model with the token columns, on the same folds). Shipping it again means bringing back a data file, a reader in
the package and the classifier's consult, and showing that leave-one-batch-out *and* a fresh batch both improve.

- **Tokens** (``tokens``): lower-cased words, numbers bucketed by magnitude and unit (``#gib:1``: tens of
  GiB), paths, URLs and hex stripped, CJK text as character bigrams; each token counted once per report.
- **Text read**: the lines the cues were read from (``cue_text``), i.e. text diagnose already holds after its one
  pass; never a second pass over a large log.
- **Vocabulary**: only tokens that occur in at least ``MIN_THREADS`` threads of at least ``MIN_BATCHES``
  batches of the training part of a fold (no thread's own words).
- **Model**: each vocabulary token is one more binary feature of diagnose's logistic regression (and of its
  phase model), fitted jointly with the cue weights with its own L2 penalty toward 0, so a word weighs only for
  what the cues do not already say. Consulted (in the evaluation) only when the cues alone are less than ``GATE``
  sure. A naive Bayes over the same tokens, added as log-odds, lost 4-10 points under both cross-validations.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

# A token enters the vocabulary from this many threads of this many batches on (no thread's own words).
MIN_THREADS = 3
MIN_BATCHES = 2
# The cues alone at least this sure: the text model is not consulted (a recognised vLLM message stays).
GATE = 0.9
# At most this many distinct lines, and characters of a line, are tokenised (bounded cost on any input).
MAX_LINES = 400
MAX_LINE_CHARS = 2000

_URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+")
_PATH = re.compile(r"(?:[a-z]:)?(?:[\w.~-]*/){2,}[\w.-]*|\\[\w\\.-]+")
_HEX = re.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{12,}\b")
_NUMBER = re.compile(r"(\d+(?:\.\d+)?)\s*(gib|gb|mib|mb|kib|kb|tib|tb|%|ms|s|k|m|g|b)?(?![a-z])")
_WORD = re.compile(r"[a-z][a-z0-9_]*(?:-[a-z0-9_]+)*")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")
_UNITS = {"gib": "gib", "gb": "gib", "g": "gib", "tib": "tib", "tb": "tib", "mib": "mib", "mb": "mib", "m": "mib",
          "kib": "kib", "kb": "kib", "k": "k", "b": "b", "%": "pct", "ms": "ms", "s": "s"}


def tokens(lines: Iterable[str]) -> frozenset[str]:
    """The report's tokens, each once (see the module docstring)."""
    out: set[str] = set()
    for n, line in enumerate(lines):
        if n >= MAX_LINES:
            break
        text = line[:MAX_LINE_CHARS].lower()
        text = _URL.sub(" ", text)
        text = _PATH.sub(" ", text)
        text = _HEX.sub(" ", text)
        for run in _CJK.findall(text):
            out.update(run[i:i + 2] for i in range(max(1, len(run) - 1)))
        text = _CJK.sub(" ", text)
        for m in _NUMBER.finditer(text):
            value = float(m.group(1))
            unit = _UNITS.get(m.group(2) or "", "n")
            magnitude = int(math.floor(math.log10(value))) if value >= 1 else 0
            out.add(f"#{unit}:{min(magnitude, 9)}")
        for w in _WORD.findall(_NUMBER.sub(" ", text)):
            if len(w) >= 2:
                out.add(w[:40])
    return frozenset(out)


def cue_text(cues: Iterable[Any]) -> list[str]:
    """The distinct lines the cues were read from (context cues carry no line)."""
    seen: dict[tuple[str, int], str] = {}
    for c in cues:
        if c.file == "(context)" or not c.text:
            continue
        seen.setdefault((c.file, c.line), c.text)
    return list(seen.values())


@dataclass(frozen=True)
class TextModel:
    """Per vocabulary token, a weight per class for the main scores and one per GPU-OOM phase for the phase model:
    the token columns of diagnose's logistic regression, fitted jointly with the cue weights (so a word counts only
    for what the cues do not already say), held at 0 by an L2 penalty until the corpus carries them."""

    weight: float  # the evidence group's scale (1: as fitted; chosen by leave-one-batch-out CV)
    main: dict[str, dict[str, float]]  # token -> class -> weight
    phase: dict[str, dict[str, float]]  # token -> phase class -> weight (the phase model's token columns)
    meta: dict[str, Any] = field(default_factory=dict)

    def _sum(self, table: dict[str, dict[str, float]], toks: Iterable[str]) -> dict[str, float]:
        out: dict[str, float] = {}
        for t in toks:
            for c, v in table.get(t, {}).items():
                out[c] = out.get(c, 0.0) + self.weight * v
        return out

    def log_odds(self, toks: Iterable[str]) -> dict[str, float]:
        """What the report's tokens add to each class's score (0 for a class no token weighs on)."""
        return self._sum(self.main, toks)

    def phase_odds(self, toks: Iterable[str]) -> dict[str, float]:
        """What they add to each GPU-OOM phase's score in the phase model."""
        return self._sum(self.phase, toks)

    def top_words(self, toks: Iterable[str], cls: str, n: int = 6) -> list[tuple[str, float]]:
        """The report's tokens that weigh most for ``cls`` (for --explain and the JSON)."""
        out = []
        for t in toks:
            v = self.weight * (self.main.get(t, {}).get(cls, 0.0) + self.phase.get(t, {}).get(cls, 0.0))
            if v > 0.005:
                out.append((t, round(v, 3)))
        out.sort(key=lambda item: (-item[1], item[0]))
        return out[:n]

