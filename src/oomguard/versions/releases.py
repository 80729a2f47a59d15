"""vLLM version strings, release families, and which releases have a flag table.

The supported list is simply the set of ``data/flags/vllm-<version>.json`` files
(adding a table adds a release; nothing here needs editing). Families group
releases whose memory accounting works alike (see docs/versions.md):

=========  ==========================  ==========
family     engine                      releases
=========  ==========================  ==========
0.6-0.7    V0                          0.6.x, 0.7.x
0.8-0.10   early V1                    0.8.x - 0.10.x
0.11-0.19  V1, profiled KV sizing      0.11 - 0.19
0.20-0.27  CUDA-graph estimate on      0.20 - 0.27
0.28-      >= 160 GiB batch tier, ...  0.28 - newest table
=========  ==========================  ==========
"""

from __future__ import annotations

import os
import re
from functools import lru_cache

import oomguard.lazy_re as lazy_re
from oomguard.errors import InputError
from oomguard.records import NamedTuple

# A string, not a Path: pathlib (with the urllib.parse and ipaddress it imports, ~3 ms) is not on plan's path.
DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "data", "flags")

# Version components are bounded ({1,9}): a 5000-digit "release" must not reach int().
_VERSION = lazy_re.compile(
    r"^v?(?P<major>\d{1,9})\.(?P<minor>\d{1,9})(?:\.(?P<patch>\d{1,9}))?(?:\.(?P<sub>\d{1,9}))?"
    r"(?:[.-]?post(?P<post>\d{1,9}))?(?:[.-]?(?P<pre>rc|dev|a|b)(?P<prenum>\d{0,9}))?"
    r"(?:\+[\w.]+)?$",
    re.IGNORECASE,
)

class Version(NamedTuple):
    """A parsed vLLM version. Orders like PEP 440 for the forms vLLM publishes."""

    key: tuple
    text: str

    @property
    def release(self) -> tuple[int, int, int, int, int]:
        """(major, minor, patch, sub, post) without pre-release or local parts."""
        return self.key[:5]

    @property
    def minor(self) -> tuple[int, int]:
        return self.key[:2]

    @property
    def is_prerelease(self) -> bool:
        return self.key[5] < 0


@lru_cache(maxsize=512)  # a plan asks for a few versions hundreds of times (every flag row's range)
def parse_version(text: str) -> Version | None:
    """Parse ``0.33.0``, ``v0.11``, ``0.8.5.post1``, ``0.10.1.1``, ``0.11.1rc2``,
    ``0.10.2.dev12+gabc``, ``0.33.0+cu128``. Returns None when it is not a version."""
    m = _VERSION.match(text.strip())
    if m is None:
        return None
    pre_rank = {"dev": -3, "a": -2, "b": -1, "rc": -0.5}.get((m["pre"] or "").lower(), 0)
    key = (int(m["major"]), int(m["minor"]), int(m["patch"] or 0), int(m["sub"] or 0),
           int(m["post"] or 0), pre_rank, int(m["prenum"] or 0))
    return Version(key, text.strip())


class Family(NamedTuple):
    """A range of vLLM releases that share one engine and one flag table."""
    name: str
    engine: str
    first_minor: tuple[int, int]
    last_minor: tuple[int, int] | None   # None: open-ended (grows with new tables)
    aliases: tuple[str, ...] = ()

    def contains(self, version: Version) -> bool:
        if version.minor < self.first_minor:
            return False
        return self.last_minor is None or version.minor <= self.last_minor


FAMILIES: tuple[Family, ...] = (
    Family("0.6-0.7", "V0 engine", (0, 6), (0, 7), ("v0",)),
    Family("0.8-0.10", "early V1 engine", (0, 8), (0, 10), ("early-v1", "v1-early")),
    Family("0.11-0.19", "V1 engine", (0, 11), (0, 19)),
    Family("0.20-0.27", "V1 engine, CUDA-graph memory estimate on", (0, 20), (0, 27)),
    Family("0.28-", "V1 engine, >= 160 GiB batch tier", (0, 28), None),
)


def _table_versions() -> list[str]:
    try:
        names = os.listdir(DATA_DIR)
    except OSError:
        return []
    return [n[len("vllm-"):-len(".json")] for n in names if n.startswith("vllm-") and n.endswith(".json")]


@lru_cache(maxsize=1)
def supported() -> tuple[str, ...]:
    """Versions with a committed table, oldest first."""
    parsed = [v for v in (parse_version(s) for s in _table_versions()) if v is not None]
    return tuple(v.text for v in sorted(parsed))


def family_of(version: str | Version) -> Family:
    """The family a version belongs to; raises InputError below 0.6."""
    v = version if isinstance(version, Version) else parse_version(version)
    if v is None:
        raise InputError(f"not a vLLM version: {version!r}")
    for fam in FAMILIES:
        if fam.contains(v):
            return fam
    raise InputError(f"vLLM {v.text} is older than the oldest supported family "
                     f"({FAMILIES[0].name}); supported: {', '.join(supported())}")


@lru_cache(maxsize=None)  # five families; find_family asks for every label on each version request
def family_label(family: Family) -> str:
    """Display name; the open-ended family shows the newest table (``0.28-0.33``)."""
    if family.last_minor is not None:
        return family.name
    newest = [parse_version(s) for s in supported()]
    in_family = [v for v in newest if v is not None and family.contains(v)]
    if not in_family:
        return family.name
    top = max(in_family)
    return f"{family.first_minor[0]}.{family.first_minor[1]}-{top.minor[0]}.{top.minor[1]}"


def find_family(name: str) -> Family | None:
    key = name.strip().lower()
    for fam in FAMILIES:
        if key == fam.name or key in fam.aliases or key == family_label(fam):
            return fam
    return None


class Choice(NamedTuple):
    """Which table answers a version request, and why (``note`` empty for an exact match)."""

    version: str
    note: str = ""


# A release this many minors past the newest table is modelled with it (with a note); beyond, it is refused.
_NEWER_MINORS = 2


def choose(spec: str | None) -> Choice:
    """Map a user's version request to a supported table (see get_release)."""
    versions = supported()
    if not versions:
        raise InputError(f"no vLLM flag tables found in {DATA_DIR}")
    listing = ", ".join(versions)
    if spec is None or spec.strip().lower() in ("", "latest", "newest"):
        return Choice(versions[-1])
    spec = spec.strip()
    fam = find_family(spec)
    if fam is not None:
        members = [s for s in versions if fam.contains(parse_version(s))]
        if not members:
            raise InputError(f"no table for family {spec}; supported: {listing}")
        return Choice(members[-1], f"family {family_label(fam)}: using its newest table, vLLM {members[-1]}")
    want = parse_version(spec)
    if want is None:
        raise InputError(f"not a vLLM version: {spec!r} (expected e.g. 0.33.0, 0.8.5.post1, 0.11, "
                         f"'latest' or a family such as 0.11-0.19); supported: {listing}")
    table = {parse_version(s).release: s for s in versions}
    parts = spec.lstrip("vV").split("+")[0].split(".")
    if len(parts) == 2 and not want.is_prerelease:  # "0.11": newest table of that minor
        same_minor = [s for s in versions if parse_version(s).minor == want.minor]
        if same_minor:
            return Choice(same_minor[-1])
    if want.release in table and not want.is_prerelease:
        return Choice(table[want.release])
    if want.is_prerelease and want.release in table:
        return Choice(table[want.release], f"vLLM {spec} is a pre-release: using the {table[want.release]} table")
    # "0.6.6" means the 0.6.6 line: its .postN re-release shares the flags.
    posts = [s for s in versions if parse_version(s).release[:4] == want.release[:4] and not want.is_prerelease]
    if posts:
        return Choice(posts[-1], f"vLLM {spec}: using the {posts[-1]} table (post-release of the same version)")
    oldest, newest = parse_version(versions[0]), parse_version(versions[-1])
    if want < oldest:
        raise InputError(f"vLLM {spec} is older than the oldest supported release ({versions[0]}); "
                         f"supported: {listing}")
    if want > newest:
        if want.release[0] != newest.release[0] or want.release[1] > newest.release[1] + _NEWER_MINORS:
            # Past the next couple of minors this is a typo (99.0, 0.330), not a release we have not seen yet.
            raise InputError(f"vLLM {spec} is not a release oomguard knows: the newest table is {versions[-1]} "
                             f"(releases up to {newest.release[0]}.{newest.release[1] + _NEWER_MINORS}.x are "
                             f"modelled with it); supported: {listing}")
        return Choice(versions[-1], f"vLLM {spec} is newer than the newest table ({versions[-1]}): using it; "
                                    f"run `python scripts/gen_flag_tables.py {want.text.lstrip('vV')}` to add one")
    fam = family_of(want)
    lower = [s for s in versions if parse_version(s) < want and fam.contains(parse_version(s))]
    if not lower:
        raise InputError(f"no supported release at or below vLLM {spec} in family {family_label(fam)}; "
                         f"supported: {listing}")
    return Choice(lower[-1], f"vLLM {spec} has no table of its own: using {lower[-1]}, the nearest older "
                             f"release in family {family_label(fam)}")
