"""What diagnose's byte scan looks for: every pattern a parser acts on, read from the parsers' own tables.

The fast path (``diagnose/prefilter.py``) compiles these into one Hyperscan database, so that a line is
parsed when it matches something a parser uses, not merely a keyword. Nothing here is a second copy:

- ``parsers/cues.py``'s ``TABLE``: every rule's pattern (a rule added there is in the scan, with no other edit);
- ``parsers/fragments.py``: its fragments;
- the ``SCAN`` tuple of every other parser module: its own compiled patterns, and the literals where a
  substring test alone decides (``errors``, ``environment``, ``paraphrase``, ``kernel``, ``memory``,
  ``identity``, ``frames``), and ``diagnose/lines.py``'s ``KERNEL_SCAN`` (kernel lines are a cue).

A pattern Hyperscan cannot take (see ``diagnose/scan_expr.py``) falls back to its keywords: a cue's own,
else the literals every match of it contains (``scan_expr.keywords``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class ScanPattern:
    name: str  # where it comes from, for notes and tests: "cue host:ps-table", "errors._SIGKILL", "kernel 'oom-kill:'"
    pattern: str  # Python regular expression syntax, as the parser compiles it
    flags: int  # re flags
    keywords: tuple[bytes, ...] = ()  # a cue's keywords (every line its pattern matches holds one)


def _from_module(module: ModuleType, items: tuple[object, ...], label: str) -> list[ScanPattern]:
    names = {id(v): k for k, v in vars(module).items() if isinstance(v, re.Pattern)}
    for k, v in vars(module).items():
        if isinstance(v, dict):
            names.update({id(x): f"{k}[{key!r}]" for key, x in v.items() if isinstance(x, re.Pattern)})
        elif isinstance(v, tuple) and not k.startswith("SCAN"):
            names.update({id(x): f"{k}[{i}]" for i, x in enumerate(v) if isinstance(x, re.Pattern)})
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(ScanPattern(f"{label} {item!r}", re.escape(item), 0))
        elif isinstance(item, re.Pattern):
            out.append(ScanPattern(f"{label}.{names.get(id(item), item.pattern[:40])}", item.pattern,
                                   item.flags & ~re.UNICODE))
        else:
            raise TypeError(f"{label}.SCAN holds {item!r}: a compiled pattern or a literal string")
    return out


def scan_patterns() -> tuple[ScanPattern, ...]:
    """Every pattern, in a fixed order (a pattern's index is its id in the scan)."""
    from oomguard.diagnose import lines
    from oomguard.diagnose.parsers import (cues, environment, errors, fragments, frames, identity, kernel, memory,
                                           paraphrase)

    out = [ScanPattern(f"cue {r.feature}", r.pattern.pattern, r.pattern.flags & ~re.UNICODE, r.keywords)
           for r in cues.TABLE]
    for module in (fragments, kernel, memory, identity, errors, environment, paraphrase, frames):
        out += _from_module(module, module.SCAN, module.__name__.rsplit(".", 1)[-1])
    out += _from_module(lines, lines.KERNEL_SCAN, "lines")
    # One entry per distinct pattern: a pattern two parsers share is searched once.
    unique: dict[tuple[str, int], ScanPattern] = {}
    for p in out:
        unique.setdefault((p.pattern, p.flags), p)
    return tuple(unique.values())
