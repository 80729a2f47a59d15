"""The calibration profile file: written by ``calibrate --write``, read by ``plan`` / ``check`` / ``fit``.

A YAML mapping::

    oomguard_calibration: 1
    min_records: 3              # a term's offset is applied only from this many start-ups
    groups:
      - gpu: H100-SXM-80GB
        release: 0.11-0.19      # vLLM's accounting family (docs/versions.md)
        model_family: dense     # dense | moe | mla | hybrid, -vl with a vision tower
        startups: 12
        terms:
          activation:
            offset_gib: 1.12    # median of logged − predicted, per GPU
            n: 12
            spread_gib: [0.95, 1.31]   # smallest and largest offset seen
            mad_gib: 0.04
            records: [vllm-0.log:88, ...]

``plan``, ``check`` and ``fit`` take it with ``--calibration FILE`` or the environment
variable ``OOMGUARD_CALIBRATION`` (the option wins); the plan names the file either way.
Every problem in the file is one line naming the file, the line and the field.
"""

from __future__ import annotations

import math
import os
from typing import Any

from oomguard.errors import InputError
from oomguard.model.calibration import MIN_RECORDS, TERMS, Calibration, Group, GroupKey, TermOffset
from oomguard.units import GiB

ENV_VAR = "OOMGUARD_CALIBRATION"
FORMAT = 1
PROFILE_BYTES = 16 << 20


def to_data(cal: Calibration, *, inputs: list[str] | None = None) -> dict:
    def gib(b: int) -> float:
        return round(b / GiB, 4)

    groups = []
    for g in cal.groups:
        terms = {}
        for t in TERMS:
            o = g.offsets.get(t)
            if o is None:
                continue
            terms[t] = {"offset_gib": gib(o.offset_bytes), "n": o.n, "spread_gib": [gib(o.low_bytes), gib(o.high_bytes)],
                        "mad_gib": gib(o.mad_bytes), "records": list(o.records)}
        groups.append({"gpu": g.key.gpu, "release": g.key.release, "model_family": g.key.model_family,
                       "startups": g.startups, "terms": terms})
    d: dict[str, Any] = {"oomguard_calibration": FORMAT, "min_records": cal.min_records}
    if inputs:
        d["inputs"] = list(inputs)
    d["groups"] = groups
    return d


def dump(cal: Calibration, *, inputs: list[str] | None = None) -> str:
    import yaml

    head = ("# oomguard calibration profile (oomguard calibrate --write): per GPU x release family x model family,\n"
            "# the median offset (logged - predicted, GiB per GPU) of each ledger term and the start-ups it came from.\n"
            "# plan / check / fit apply it with --calibration FILE or OOMGUARD_CALIBRATION=FILE.\n")
    return head + yaml.safe_dump(to_data(cal, inputs=inputs), sort_keys=False, allow_unicode=True, width=200)


def load(path: str) -> Calibration:
    """Read and check a profile (InputError naming file, line and field)."""
    from oomguard.inputs import files
    from oomguard.inputs.structured import load_yaml_with_node

    text = files.read_text(path, limit=PROFILE_BYTES, what="calibration profile", strict=True)
    data, node = load_yaml_with_node(text, file=path)
    where = _Where(path, node)
    if not isinstance(data, dict):
        raise InputError("a calibration profile is a YAML mapping (oomguard calibrate --write writes one)", file=path, line=1)
    fmt = data.get("oomguard_calibration")
    if fmt != FORMAT:
        raise InputError(f"oomguard_calibration: expected {FORMAT} (a profile written by oomguard calibrate --write), found {fmt!r}",
                         file=path, line=where.line(("oomguard_calibration",)) or 1)
    min_records = data.get("min_records", MIN_RECORDS)
    if isinstance(min_records, bool) or not isinstance(min_records, int) or min_records < MIN_RECORDS:
        raise InputError(f"min_records: an integer of at least {MIN_RECORDS} (fewer start-ups prove nothing), found {min_records!r}",
                         file=path, line=where.line(("min_records",)))
    groups_raw = data.get("groups")
    if not isinstance(groups_raw, list):
        raise InputError("groups: expected a list of groups", file=path, line=where.line(("groups",)) or 1)
    groups = []
    seen: set = set()
    for i, g in enumerate(groups_raw):
        at = ("groups", i)
        if not isinstance(g, dict):
            raise InputError(f"groups[{i}]: expected a mapping", file=path, line=where.line(at))
        key_parts = []
        for k in ("gpu", "release", "model_family"):
            v = g.get(k)
            if not isinstance(v, str) or not v.strip():
                raise InputError(f"groups[{i}].{k}: expected a name, found {v!r}", file=path, line=where.line(at + (k,)) or where.line(at))
            key_parts.append(v.strip())
        key = GroupKey(*key_parts)
        if key in seen:
            raise InputError(f"groups[{i}]: {key.label()} appears twice", file=path, line=where.line(at))
        seen.add(key)
        startups = _int(g.get("startups", 0), f"groups[{i}].startups", path, where.line(at + ("startups",)) or where.line(at))
        terms = g.get("terms") or {}
        if not isinstance(terms, dict):
            raise InputError(f"groups[{i}].terms: expected a mapping of term -> offset", file=path, line=where.line(at + ("terms",)))
        offsets = {}
        for t, o in terms.items():
            tat = at + ("terms", t)
            line = where.line(tat) or where.line(at)
            if t not in TERMS:
                raise InputError(f"groups[{i}].terms.{t}: not a ledger term (one of {', '.join(TERMS)})", file=path, line=line)
            if not isinstance(o, dict):
                raise InputError(f"groups[{i}].terms.{t}: expected a mapping with offset_gib and n", file=path, line=line)
            off = _gib(o.get("offset_gib"), f"groups[{i}].terms.{t}.offset_gib", path, line)
            n = _int(o.get("n"), f"groups[{i}].terms.{t}.n", path, line)
            spread = o.get("spread_gib", [o.get("offset_gib"), o.get("offset_gib")])
            if not (isinstance(spread, list) and len(spread) == 2):
                raise InputError(f"groups[{i}].terms.{t}.spread_gib: expected [smallest, largest]", file=path, line=line)
            lo = _gib(spread[0], f"groups[{i}].terms.{t}.spread_gib", path, line)
            hi = _gib(spread[1], f"groups[{i}].terms.{t}.spread_gib", path, line)
            if not lo <= off <= hi:
                raise InputError(f"groups[{i}].terms.{t}: offset_gib {off / GiB:g} outside its spread_gib [{lo / GiB:g}, {hi / GiB:g}]",
                                 file=path, line=line)
            mad = _gib(o.get("mad_gib", 0), f"groups[{i}].terms.{t}.mad_gib", path, line)
            records = o.get("records", [])
            if not isinstance(records, list):
                raise InputError(f"groups[{i}].terms.{t}.records: expected a list", file=path, line=line)
            offsets[t] = TermOffset(t, off, n, lo, hi, abs(mad), tuple(str(r) for r in records))
        groups.append(Group(key, startups, offsets))
    return Calibration(tuple(groups), source=path, min_records=min_records)


def from_option(value: str | None) -> Calibration | None:
    """The profile of ``--calibration`` or, without it, of ``$OOMGUARD_CALIBRATION`` (None when neither is set)."""
    path = value or os.environ.get(ENV_VAR) or None
    if not path:
        return None
    cal = load(path)
    if not value:
        from dataclasses import replace

        cal = replace(cal, source=f"{path} from ${ENV_VAR}")
    return cal


_MAX_GIB = 4096.0


def _gib(v: Any, what: str, path: str, line: int | None) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or abs(v) > _MAX_GIB:
        raise InputError(f"{what}: expected a number of GiB (|x| ≤ {_MAX_GIB:g}), found {v!r}", file=path, line=line)
    return int(round(v * GiB))


def _int(v: Any, what: str, path: str, line: int | None) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > 10**9:
        raise InputError(f"{what}: expected a count, found {v!r}", file=path, line=line)
    return v


class _Where:
    """Line numbers of keys in the composed YAML tree."""

    def __init__(self, path: str, node: Any):
        self.path, self.node = path, node

    def line(self, keys: tuple) -> int | None:
        node = self.node
        found = None
        for k in keys:
            if node is None:
                break
            if isinstance(k, int):
                seq = getattr(node, "value", None)
                if not isinstance(seq, list) or k >= len(seq) or not hasattr(seq[k], "tag") or isinstance(seq[k], tuple):
                    return found
                node = seq[k]
                found = node.start_mark.line + 1
            else:
                pairs = getattr(node, "value", None)
                if not isinstance(pairs, list):
                    return found
                nxt = None
                for kn, vn in pairs:
                    if isinstance(kn, tuple) or getattr(kn, "value", None) != k:
                        continue
                    found = kn.start_mark.line + 1
                    nxt = vn
                    break
                if nxt is None:
                    return found
                node = nxt
        return found
