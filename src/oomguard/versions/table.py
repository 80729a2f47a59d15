"""One release's flag table, loaded from package data, and how option strings resolve.

``Release.resolve_option`` answers "which flag does this command-line word mean
in vLLM X?" the way vLLM's own parser would: its FlexibleArgumentParser first
rewrites underscores to dashes (only before the first ``.`` from 0.9.2 on),
splits dotted JSON keys (``--compilation-config.mode``), maps ``-O3`` to the
optimisation flag (0.12+), then argparse matches exact option strings or an
unambiguous prefix (``--kv-cache-memory`` -> ``--kv-cache-memory-bytes``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from enum import Enum
from functools import lru_cache
from types import MappingProxyType

from oomguard.errors import InputError
from oomguard.records import NamedTuple, field, record

from . import releases

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any


class FlagType(str, Enum):
    """The kind of value a flag takes (``size`` = integer with k/K/M/G suffixes)."""

    INT = "int"
    FLOAT = "float"
    STR = "str"
    BOOL = "bool"
    JSON = "json"
    SIZE = "size"
    LIST = "list"


class FlagGroup(str, Enum):
    """``engine``: EngineArgs / AsyncEngineArgs; ``frontend``: the API server's own options."""

    ENGINE = "engine"
    FRONTEND = "frontend"


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


class Flag(NamedTuple):
    """One ``vllm serve`` argument of one release.

    ``default`` is the argparse default (what ``vllm serve`` starts from); ``None``
    often means "computed at run time" (e.g. ``max_num_seqs``, ``block_size``).
    ``engine_default`` is set only where the ``EngineArgs`` dataclass (the ``LLM``
    class) starts from something else. ``default_repr`` describes a default that
    is not JSON (e.g. ``CompilationConfig()``).
    """

    dest: str
    options: tuple[str, ...]
    takes_value: bool
    type: FlagType
    choices: tuple | None = None
    default: Any = None
    deprecated: bool = False
    negatives: tuple[str, ...] = ()
    deprecated_options: tuple[str, ...] = ()
    nargs: str | int | None = None
    item: FlagType | None = None
    accepts_auto: bool = False
    const: Any = None
    action: str | None = None
    group: FlagGroup = FlagGroup.ENGINE
    default_repr: str | None = None
    engine_default: Any = UNSET

    @property
    def name(self) -> str:
        """The canonical option string (first long option)."""
        longs = [o for o in self.options + self.negatives if o.startswith("--")]
        return longs[0] if longs else (self.options + self.negatives)[0]

    @property
    def all_options(self) -> tuple[str, ...]:
        return self.options + self.negatives


class Resolved(NamedTuple):
    """What an option string means: ``negated`` for ``--no-x`` / ``--disable-x`` forms
    (the flag is set to False); ``value`` holds ``=VALUE`` or an attached short-option
    value (``-O3``); ``subkey`` the dotted JSON path (``--compilation-config.mode``)."""

    flag: Flag
    negated: bool = False
    option: str = ""
    value: str | None = None
    subkey: str | None = None
    deprecated: bool = False


class UnknownFlagError(InputError):
    """An option this release's ``vllm serve`` would reject as unrecognized.

    ``suggestion``: the closest option of this release (or the documented
    replacement); ``other_versions``: supported releases whose parser does have it.
    """

    def __init__(self, option: str, version: str, suggestion: str | None,
                 other_versions: tuple[str, ...], detail: str = "", *,
                 file: str | None = None, line: int | None = None):
        self.option = option
        self.version = version
        self.suggestion = suggestion
        self.other_versions = other_versions
        message = f"unknown vLLM flag {option} for vLLM {version}"
        if detail:
            message += f": {detail}"
        if suggestion:
            message += f"; did you mean {suggestion}?"
        super().__init__(message, file=file, line=line)


class AmbiguousFlagError(InputError):
    """An abbreviation that matches several options (argparse: "ambiguous option")."""

    def __init__(self, option: str, version: str, candidates: tuple[str, ...], *,
                 file: str | None = None, line: int | None = None):
        self.option = option
        self.candidates = candidates
        shown = ", ".join(candidates[:8]) + (" ..." if len(candidates) > 8 else "")
        super().__init__(f"ambiguous vLLM flag {option} for vLLM {version}: could match {shown}",
                         file=file, line=line)


class ParserBehaviour(NamedTuple):
    """How one release's argument parser treats prefixes, negations and repeated options."""
    underscores: str = "before_dot"   # all | before_dot | none
    dotted_json: bool = True
    config_file: bool = True
    short_O: str | None = None
    enable_disable: bool = False
    abbrev: bool = True


class OptionHistory(NamedTuple):
    """Where an option string exists among the supported releases."""

    option: str
    present_in: tuple[str, ...]
    first: str | None
    last: str | None
    added_in: str | None     # first supported release that has it, if an older one does not
    removed_in: str | None   # first supported release after ``last`` (None if still present)


@record(frozen=True)  # shared between callers; memoises close matches in its __dict__ (so not a NamedTuple)
class Release:
    """One vLLM release's flags and parser behaviour (data/flags)."""
    version: str
    commit: str | None
    family: str
    flags: Mapping[str, Flag]        # read-only: tables are shared between callers
    env: Mapping[str, dict]
    parser: ParserBehaviour
    note: str = ""
    _index: dict[str, tuple[str, bool]] = field(default_factory=dict, repr=False, compare=False)  # option -> (dest, negated)

    def with_note(self, note: str) -> Release:
        """The same table, with ``note`` saying why this release was chosen (versions.get_release)."""
        return Release(self.version, self.commit, self.family, self.flags, self.env, self.parser, note, self._index)

    # ------------------------------------------------------------- lookups
    def flag(self, dest: str) -> Flag:
        try:
            return self.flags[dest]
        except KeyError:
            raise KeyError(f"vLLM {self.version} has no argument {dest!r}") from None

    def has_option(self, option: str) -> bool:
        return self._normalise(option) in self._index

    def env_default(self, name: str) -> Any:
        """Default of a ``vllm/envs.py`` variable (None when unset means None)."""
        try:
            return self.env[name].get("default")
        except KeyError:
            raise KeyError(f"vLLM {self.version} does not read environment variable {name}") from None

    def history(self, option: str) -> OptionHistory:
        return option_history(self._normalise(option))

    # ---------------------------------------------------------- resolution
    def normalise(self, option: str) -> str:
        """The option word as this release's parser sees it before matching
        (underscores to dashes per ``parser.underscores``); no prefix matching."""
        return self._normalise(option)

    def _normalise(self, option: str) -> str:
        if not option.startswith("--"):
            return option
        if self.parser.underscores == "all":
            return option.replace("_", "-")
        if self.parser.underscores == "before_dot":
            head, dot, tail = option.partition(".")
            return head.replace("_", "-") + dot + tail
        return option

    def resolve_option(self, option: str, *, file: str | None = None, line: int | None = None) -> Resolved:
        """Resolve one command-line option word (``--x``, ``--x=1``, ``-tp``, ``-O3``)."""
        if not option.startswith("-") or option in ("-", "--"):
            raise InputError(f"not an option: {option!r}", file=file, line=line)
        word, eq, inline = option.partition("=")
        value = inline if eq else None
        word = self._normalise(word)
        subkey = None
        if self.parser.dotted_json and "." in word:
            word, _, subkey = word.partition(".")
            subkey = subkey.rstrip("+")
        if not word.startswith("--"):
            return self._resolve_short(option, word, value, subkey, file, line)
        hit = self._index.get(word)
        if hit is not None:
            return self._resolved(hit, word, value, subkey)
        if self.parser.abbrev:
            candidates = tuple(o for o in self._index if o.startswith(word))
            if len(candidates) == 1:
                return self._resolved(self._index[candidates[0]], candidates[0], value, subkey)
            if len(candidates) > 1:
                raise AmbiguousFlagError(option.partition("=")[0], self.version, tuple(sorted(candidates)),
                                         file=file, line=line)
        raise self._unknown(option.partition("=")[0], word, file, line)

    def _resolve_short(self, option: str, word: str, value: str | None, subkey: str | None,
                       file: str | None, line: int | None) -> Resolved:
        if word in self._index:
            return self._resolved(self._index[word], word, value, subkey)
        if self.parser.short_O == "--optimization-level" and word.startswith("-O") and len(word) > 2:
            flag_hit = self._index.get("--optimization-level")
            if flag_hit is not None:
                return self._resolved(flag_hit, "--optimization-level", word[2:], None)
        # argparse: a registered two-character option followed by its value ("-O3", "-q8")
        # or a unique prefix of a longer single-dash option ("-t" -> "-tp")
        matches = []
        for opt in self._index:
            if opt.startswith("--"):
                continue
            if len(opt) == 2 and word[:2] == opt and len(word) > 2:
                matches.append((opt, word[2:]))
            elif opt.startswith(word):
                matches.append((opt, None))
        if len(matches) == 1:
            opt, attached = matches[0]
            return self._resolved(self._index[opt], opt, attached if attached is not None else value, subkey)
        if len(matches) > 1:
            raise AmbiguousFlagError(option, self.version, tuple(sorted(m[0] for m in matches)),
                                     file=file, line=line)
        raise self._unknown(option.partition("=")[0], word, file, line)

    def _resolved(self, hit: tuple[str, bool], option: str, value: str | None, subkey: str | None) -> Resolved:
        dest, negated = hit
        flag = self.flags[dest]
        deprecated = flag.deprecated or option in flag.deprecated_options
        return Resolved(flag, negated, option, value, subkey, deprecated)

    _MAX_SUGGESTIONS = 256  # difflib costs ~1 ms a flag: a file with 40,000 unknown flags would take a minute

    def _close_match(self, word: str) -> str | None:
        memo = self.__dict__.setdefault("_suggestions", {})
        if word not in memo:
            if len(memo) >= self._MAX_SUGGESTIONS:
                return None
            import difflib  # only on the error path

            close = difflib.get_close_matches(word, [o for o in self._index if o.startswith("--")], n=1, cutoff=0.75)
            memo[word] = close[0] if close else None
        return memo[word]

    def _unknown(self, shown: str, word: str, file: str | None, line: int | None) -> UnknownFlagError:
        from .renames import rename_for

        hist = option_history(word)
        others = tuple(v for v in hist.present_in if v != self.version)
        rename = rename_for(word)
        details = []
        suggestion = None
        if rename is not None:
            details.append(rename.describe())
            if rename.suggest and rename.new and self.has_option(rename.new):
                suggestion = rename.new
        elif others:
            details.append(_presence_text(hist, self.version))
        if rename is None:
            suggestion = self._close_match(word)
        return UnknownFlagError(shown, self.version, suggestion, others, "; ".join(details), file=file, line=line)


def _presence_text(hist: OptionHistory, version: str) -> str:
    here = releases.parse_version(version)
    versions = releases.supported()
    older = [v for v in hist.present_in if releases.parse_version(v) < here]
    newer = [v for v in hist.present_in if releases.parse_version(v) > here]
    if older:
        gone = versions[versions.index(older[-1]) + 1]
        text = f"removed in {gone} (last accepted by {older[-1]})"
        return text + (f", accepted again from {newer[0]}" if newer else "")
    if newer:
        return f"added in {newer[0]}"
    return ""


# ------------------------------------------------------------------ loading
def _flag_from_json(raw: dict) -> Flag:
    item = raw.get("item")
    return Flag(
        dest=raw["dest"],
        options=tuple(raw.get("options", ())),
        takes_value=raw.get("takes_value", True),
        type=FlagType(raw.get("type", "str")),
        choices=tuple(raw["choices"]) if raw.get("choices") is not None else None,
        default=raw.get("default"),
        deprecated=raw.get("deprecated", False),
        negatives=tuple(raw.get("neg", ())),
        deprecated_options=tuple(raw.get("deprecated_options", ())),
        nargs=raw.get("nargs"),
        item=FlagType(item) if item else None,
        accepts_auto=raw.get("auto", False),
        const=raw.get("const"),
        action=raw.get("action"),
        group=FlagGroup(raw.get("group", "engine")),
        default_repr=raw.get("default_repr"),
        engine_default=raw["engine_default"] if "engine_default" in raw else UNSET,
    )


class _Flags(Mapping):
    """A release's flags by dest, each ``Flag`` built from its table entry when first asked for: a plan
    reads a dozen of the ~320 (building them all was ~3 ms of every command's start-up). Read-only."""

    __slots__ = ("_raw", "_built")

    def __init__(self, raw: dict[str, dict]):
        self._raw = raw
        self._built: dict[str, Flag] = {}

    def __getitem__(self, dest: str) -> Flag:
        flag = self._built.get(dest)
        if flag is None:
            flag = self._built[dest] = _flag_from_json(self._raw[dest])
        return flag

    def __contains__(self, dest: object) -> bool:
        return dest in self._raw

    def __iter__(self):
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __repr__(self) -> str:
        return f"<{len(self._raw)} vLLM flags>"


@lru_cache(maxsize=None)
def load_table(version: str) -> Release:
    """The release table for an exact supported version string (cached)."""
    path = os.path.join(releases.DATA_DIR, f"vllm-{version}.json")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.loads(fh.read())
    except FileNotFoundError:
        raise InputError(f"no flag table for vLLM {version}; supported: {', '.join(releases.supported())}") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: unreadable flag table ({exc})") from None
    raw: dict[str, dict] = {}
    index: dict[str, tuple[str, bool]] = {}
    for entry in data["flags"]:
        dest = entry["dest"]
        raw[dest] = entry  # one entry per dest (the generator's; test_versions_option_index checks)
        for opt in entry.get("options", ()):
            index.setdefault(opt, (dest, False))
        for opt in entry.get("neg", ()):
            index.setdefault(opt, (dest, True))
    parser = ParserBehaviour(**{k: v for k, v in data.get("parser", {}).items()
                                if k in ParserBehaviour._fields})
    fam = releases.family_label(releases.family_of(data["version"]))
    return Release(data["version"], data.get("commit"), fam, _Flags(raw),
                   MappingProxyType(data.get("env", {})), parser, "", index)


@lru_cache(maxsize=None)
def _options_of(version: str) -> frozenset[str]:
    return frozenset(load_table(version)._index)


@lru_cache(maxsize=512)
def option_history(option: str) -> OptionHistory:
    """Which supported releases accept this exact (normalised) option string."""
    from . import option_index

    versions = releases.supported()
    present = option_index.present_in(option)
    if present is None:  # no index built from exactly these tables: read them all (slow, never stale)
        present = tuple(v for v in versions if option in _options_of(v))
    if not present:
        return OptionHistory(option, (), None, None, None, None)
    first, last = present[0], present[-1]
    i_first, i_last = versions.index(first), versions.index(last)
    added = first if i_first > 0 else None
    removed = versions[i_last + 1] if i_last + 1 < len(versions) else None
    return OptionHistory(option, present, first, last, added, removed)
