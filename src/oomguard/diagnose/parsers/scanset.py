"""What diagnose's byte scan looks for: every pattern a parser acts on, read from the parsers' own tables.

The fast path (``diagnose/prefilter.py``) compiles these into one Hyperscan database, so that a line is
parsed when it matches something a parser uses, not merely a keyword. Nothing here is a second copy:

- ``parsers/cues.py``'s ``TABLE``: every rule's pattern (a rule added there is in the scan, with no other edit);
- ``parsers/fragments.py``: its fragments;
- every other parser module (``errors``, ``environment``, ``paraphrase``, ``kernel``, ``memory``, ``identity``,
  ``frames``): **every compiled pattern it holds at module level** (alone, or in a tuple or dict), so a pattern
  added there is scanned with no other edit, except those its ``NOT_SCANNED`` tuple names (helpers that only
  read lines another test already chose, broad enough to select every line: ``api_server.py``, ``x=1``, any CJK
  character); plus its ``SCAN`` tuple: the literals where a substring test alone decides (``"NCCL WARN" in msg``),
  and patterns that are not module-level names;
- ``diagnose/lines.py``'s ``KERNEL_SCAN`` (kernel lines are a cue) and ``ONCE_SCAN`` (one line per block).

A pattern Hyperscan cannot take (see ``diagnose/scan_expr.py``) falls back to its keywords: a cue's own,
else the literals every match of it contains (``scan_expr.keywords``).
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import TYPE_CHECKING

from oomguard.lazy_re import is_pattern  # the parsers' patterns compile on first use (oomguard/lazy_re.py)
from oomguard.records import record

if TYPE_CHECKING:
    from oomguard.diagnose.parsers import cues


@record(frozen=True)
class ScanPattern:
    name: str  # where it comes from, for notes and tests: "cue host:ps-table", "errors._SIGKILL", "kernel 'oom-kill:'"
    pattern: str  # Python regular expression syntax, as the parser compiles it
    flags: int  # re flags
    keywords: tuple[bytes, ...] = ()  # a cue's keywords (every line its pattern matches holds one)
    once: bool = False  # one matching line per block is enough (a fact any such line gives: lines.ONCE_SCAN)


def module_patterns(module: ModuleType) -> dict[int, tuple[str, re.Pattern[str]]]:
    """Every compiled pattern the module holds at module level, by id: (its name there, the pattern)."""
    found: dict[int, tuple[str, re.Pattern[str]]] = {}
    for k, v in vars(module).items():
        if is_pattern(v):
            found.setdefault(id(v), (k, v))
        elif isinstance(v, dict):
            found.update({id(x): (f"{k}[{key!r}]", x) for key, x in v.items() if is_pattern(x)})
        elif isinstance(v, tuple) and k not in ("SCAN", "NOT_SCANNED", "KERNEL_SCAN"):
            found.update({id(x): (f"{k}[{i}]", x) for i, x in enumerate(v) if is_pattern(x)})
    return found


def _from_module(module: ModuleType, items: tuple[object, ...], label: str, *, every: bool = True) -> list[ScanPattern]:
    patterns = module_patterns(module)
    names = {i: name for i, (name, _) in patterns.items()}
    if every:
        skip = {id(x) for x in getattr(module, "NOT_SCANNED", ())}
        items = tuple(x for i, (_, x) in patterns.items() if i not in skip) + tuple(items)
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(ScanPattern(f"{label} {item!r}", re.escape(item), 0))
        elif is_pattern(item):
            out.append(ScanPattern(f"{label}.{names.get(id(item), item.pattern[:40])}", item.pattern,
                                   item.flags & ~re.UNICODE))
        else:
            raise TypeError(f"{label}.SCAN holds {item!r}: a compiled pattern or a literal string")
    return out


def _cue(rule: cues.CueRule) -> ScanPattern:
    """A cue is tried only on a line holding one of its keywords *and* matching its pattern (parse_cues), so
    either one alone finds every line it fires on. Its pattern, usually: far fewer lines hold it than a keyword
    (``PID``, ``137``, ``lora``). Its keywords when they are ``exact_keywords``: words the pattern matches
    ignoring case but the cue wants as written ("kv cache" in a sentence, not every metrics line's "GPU KV cache
    usage")."""
    if rule.exact_keywords:
        return ScanPattern(f"cue {rule.feature} (keywords)", "|".join(re.escape(k.decode()) for k in rule.keywords), 0,
                           rule.keywords)
    return ScanPattern(f"cue {rule.feature}", rule.pattern.pattern, rule.pattern.flags & ~re.UNICODE, rule.keywords)


def scan_patterns() -> tuple[ScanPattern, ...]:
    """Every pattern, in a fixed order (a pattern's index is its id in the scan)."""
    from oomguard.diagnose import lines
    from oomguard.diagnose.parsers import (cues, environment, errors, fragments, frames, identity, kernel, memory,
                                           paraphrase)

    out = [_cue(r) for r in cues.TABLE]
    for module in (fragments, kernel, memory, identity, errors, environment, paraphrase, frames):
        out += _from_module(module, getattr(module, "SCAN", ()), module.__name__.rsplit(".", 1)[-1])
    out += _from_module(lines, lines.KERNEL_SCAN, "lines", every=False)
    out += [ScanPattern(p.name, p.pattern, p.flags, once=True)
            for p in _from_module(lines, lines.ONCE_SCAN, "lines", every=False)]
    # One entry per distinct pattern: a pattern two parsers share is searched once.
    unique: dict[tuple[str, int], ScanPattern] = {}
    for p in out:
        unique.setdefault((p.pattern, p.flags), p)
    return tuple(unique.values())
