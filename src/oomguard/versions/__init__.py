"""vLLM version awareness: which flags each release accepts, their defaults, and renames.

The tables are generated from the real vLLM wheels by ``scripts/gen_flag_tables.py``
and shipped as package data (``oomguard/data/flags/vllm-<version>.json``); this
package only reads them, lazily, one release at a time.

    >>> from oomguard.versions import get_release
    >>> rel = get_release("0.33")
    >>> rel.resolve_option("--kv-cache-memory").flag.dest
    'kv_cache_memory_bytes'
    >>> rel.flags["gpu_memory_utilization"].default
    0.92

Public API: ``SUPPORTED``, ``family_of``, ``get_release``, ``Release``, ``Flag``,
``FlagType``, ``Resolved``, ``OptionHistory``, ``UnknownFlagError``,
``AmbiguousFlagError``, ``parse_version``, and ``renames`` (hand-written notes).
"""

from __future__ import annotations

from functools import lru_cache

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:  # real imports happen on first attribute access (PEP 562)
    from typing import Any

    from .releases import Family, parse_version
    from .table import (
        AmbiguousFlagError,
        Flag,
        FlagGroup,
        FlagType,
        OptionHistory,
        ParserBehaviour,
        Release,
        Resolved,
        UnknownFlagError,
        option_history,
    )

_LAZY = {
    "Family": "releases", "parse_version": "releases",
    "AmbiguousFlagError": "table", "Flag": "table", "FlagGroup": "table", "FlagType": "table",
    "OptionHistory": "table", "ParserBehaviour": "table", "Release": "table", "Resolved": "table",
    "UnknownFlagError": "table", "option_history": "table",
}

__all__ = [
    "SUPPORTED",
    "AmbiguousFlagError",
    "Family",
    "Flag",
    "FlagGroup",
    "FlagType",
    "OptionHistory",
    "ParserBehaviour",
    "Release",
    "Resolved",
    "UnknownFlagError",
    "family_of",
    "get_release",
    "option_history",
    "parse_version",
]


def family_of(version: str) -> str:
    """The release family of a version, e.g. ``"0.8-0.10"`` for ``0.8.5.post1``.

    The newest family is open-ended and named after the newest table (``0.28-0.33``).
    Raises InputError for versions older than 0.6 or strings that are not versions.
    """
    from .releases import family_label
    from .releases import family_of as _family_of

    return family_label(_family_of(version))


def get_release(version: str | None = None) -> Release:
    """The flag table for a vLLM version.

    Accepts ``"0.33.0"``, ``"0.33"`` (newest table of that minor), ``"v0.11.0"``,
    ``"0.8.5.post1"``, a family (``"0.11-0.19"``, ``"v0"``), or ``None`` / ``"latest"``
    for the newest. A version without its own table maps to the nearest older
    table of its family (a patch release known to share its flags maps to its
    ``.0``; a newer-than-newest release maps to the newest) and ``Release.note``
    says so. Older than the oldest table, or not a version: InputError listing
    the supported releases.
    """
    return _release_for(version)


@lru_cache(maxsize=256)  # fit and check ask for the same release hundreds of times (each plan it tries)
def _release_for(version: str | None) -> Release:
    from .releases import choose
    from .table import load_table

    choice = choose(version)
    release = load_table(choice.version)
    if choice.note:
        release = release.with_note(choice.note)
    return release


def __getattr__(name: str) -> Any:
    # SUPPORTED lists the data directory: done on first use, not at import
    if name == "SUPPORTED":
        from .releases import supported

        return list(supported())
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
