"""Phase hints in words people write around an error ("OOM during warmup", "when handling requests").

Pasted reports often carry no log prefix and no traceback, only a sentence. The
words in it still say when the failure happened; these hints are weaker
evidence than a phase marker or a traceback frame and are used only when
neither is present.
"""

from __future__ import annotations

import re

_HINTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("sampler", re.compile(r"\bsampler\b|dummy requests", re.IGNORECASE)),
    ("capture", re.compile(r"captur|cuda ?graph|cudagraph", re.IGNORECASE)),
    ("warmup", re.compile(r"warm[- ]?up|warming", re.IGNORECASE)),
    ("profile", re.compile(r"profil|dummy (?:run|input)|determine_num_available_blocks", re.IGNORECASE)),
    ("loading", re.compile(r"\bload(?:ing)?\b(?! test)|weights? (?:do not|don't) fit|loading weights", re.IGNORECASE)),
    ("serving", re.compile(
        r"\brequests?\b|\binference\b|\bserving\b|under load|load test|\bgenerat|long prompts?|concurren|\bbatch(?:es)? of\b",
        re.IGNORECASE)),
    ("multimodal", re.compile(r"\bimages?\b|vision|multimodal|multi-modal|\bvideo\b|encoder", re.IGNORECASE)),
)


def phase_hints(text: str) -> frozenset[str]:
    return frozenset(name for name, rx in _HINTS if rx.search(text))
