"""A learned text model beside the named cues: the report's own words, weighed per class.

The hand-written cues (``parsers/cues.py``) know only the words someone wrote into code; this model learns
which words of a report go with which class from the labelled corpus itself, so cross-validation (leave one
batch out) measures how well it generalises: its "code" is the data.

- **Tokens** (``tokens``): lower-cased words, numbers bucketed by magnitude and unit (``#gib:10``: tens of
  GiB), paths, URLs and hex stripped, CJK text as character bigrams; each token counted once per report.
- **Vocabulary**: only tokens that occur in at least ``MIN_THREADS`` threads of at least ``MIN_BATCHES``
  batches of the training corpus (no thread's own words), chosen by ``scripts/train_diagnose.py``.
- **Model**: each vocabulary token is one more binary feature of diagnose's logistic regression (and of its
  phase model), fitted jointly with the cue weights by ``scripts/train_diagnose.py`` with its own, stronger L2
  penalty toward 0 (chosen by leave-one-batch-out cross-validation), so a word weighs only for what the cues
  do not already say. The token columns are stored in ``src/oomguard/data/diagnose_text.json`` and read here
  with the standard library. (A naive Bayes over the same tokens, added as log-odds, lost 4-10 points under
  both cross-validations: it counts again what the cues already say.)
- **Use** (``classifier.classify``): one more evidence group, the tokens' weights added to the cue scores. It only ranks classes when a failure cue
  exists (no anchor: no verdict, as before), and never when the cues alone are sure (``GATE``): a vLLM
  message the cues recognise keeps its verdict.

Not shipped at present (``scripts/train_diagnose.py``'s ``LAMBDA_TEXT = None``, so no data file: the cues alone
decide): it did not improve the fresh batches C07 / C08 and moved two hand-checked shapes (docs/diagnose.md, "The
text model and the fitted cap"). The classifier consults it whenever the file exists.

Text read: the lines the cues were read from (every cue's line, anchors and report cues: ``cue_text``), i.e.
text diagnose already holds after its one pass; never a second pass over a large log. The same lines come
out of the fast path and of parsing every line (the cues are equal), so the verdicts are too.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

TEXT_FILE = Path(__file__).resolve().parents[1] / "data" / "diagnose_text.json"
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

    def to_dict(self) -> dict[str, Any]:
        return {"meta": self.meta, "weight": self.weight, "main": self.main, "phase": self.phase}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TextModel:
        def table(rows: dict) -> dict[str, dict[str, float]]:
            return {str(t): {str(c): float(v) for c, v in row.items()} for t, row in rows.items()}

        return cls(float(data.get("weight", 1.0)), table(data.get("main", {})), table(data.get("phase", {})),
                   dict(data.get("meta", {})))


# ``Weights.text`` of the shipped weights: the shipped text model, read from its file on first use only.
SHIPPED = "shipped"


def resolve(text: TextModel | str | None) -> TextModel | None:
    return load() if text == SHIPPED else text  # type: ignore[return-value]


@lru_cache(maxsize=2)
def load(path: str | None = None) -> TextModel | None:
    """The shipped text model (None when there is no file: the cues alone)."""
    target = Path(path) if path else TEXT_FILE
    if not target.exists():
        return None
    with open(target, encoding="utf-8") as fh:
        return TextModel.from_dict(json.load(fh))
