"""Did-you-mean, bounded by the word's length.

``difflib`` is quadratic in the lengths it compares: a 64 KiB ``--model`` took ~30 s to get its
suggestions. No name a suggestion is for is long (Hugging Face ids are at most 96 + 1 + 96
characters, GPU names a few dozen), so a word is compared by its first ``MAX_CHARS`` characters,
which can still match, in time independent of what the user pasted.
"""

from __future__ import annotations

MAX_CHARS = 200


def clip(word: str) -> str:
    """The part of ``word`` suggestions compare."""
    return word[:MAX_CHARS]


def close_matches(word: str, choices: list[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """``difflib.get_close_matches`` on the clipped word."""
    import difflib

    return difflib.get_close_matches(clip(word), choices, n=n, cutoff=cutoff)


def ratio(a: str, b: str) -> float:
    """``difflib.SequenceMatcher`` similarity of the clipped strings."""
    import difflib

    return difflib.SequenceMatcher(None, clip(a), clip(b)).ratio()
