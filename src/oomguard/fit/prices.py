"""GPU prices for ``fit``'s hardware search: the bundled table (data/prices.yaml) or the user's own.

A price file is a YAML mapping with ``rows``: one per card, ``gpu`` (a name the GPU catalog
resolves: ``H100``, ``RTX-4090``, ``A100-80GB MIG 3g.40gb``), ``usd_per_gpu_hour`` (0 for owned
hardware), and optionally ``date``, ``source``, ``tier``. Every problem is one line naming the
file, the line and the field.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import Any

from oomguard.errors import InputError, OomguardError

PRICE_BYTES = 4 << 20
MAX_PRICE = 10_000.0  # USD per GPU-hour: more is a typo


@dataclass(frozen=True)
class Price:
    gpu: str  # the catalog name
    usd_per_gpu_hour: float
    date: str = ""
    source: str = ""
    tier: str = ""
    line: int | None = None

    def to_dict(self) -> dict:
        return {"gpu": self.gpu, "usd_per_gpu_hour": self.usd_per_gpu_hour, "date": self.date or None,
                "source": self.source or None, "tier": self.tier or None}


@dataclass(frozen=True)
class PriceTable:
    rows: dict  # catalog name -> Price
    source: str
    currency: str = "USD"

    def price_of(self, gpu_name: str) -> Price | None:
        return self.rows.get(gpu_name)


def bundled_path() -> str:
    from importlib import resources

    return str(resources.files("oomguard").joinpath("data", "prices.yaml"))


def load(path: str | None = None) -> PriceTable:
    from oomguard.inputs import files
    from oomguard.inputs.hardware import lookup_gpu
    from oomguard.inputs.structured import load_yaml_with_node

    shown = path or "data/prices.yaml (bundled)"
    text = files.read_text(path or bundled_path(), limit=PRICE_BYTES, what="price table", strict=True)
    data, node = load_yaml_with_node(text, file=shown)
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise InputError("a price table is a YAML mapping with a list of rows (gpu, usd_per_gpu_hour, date, source)",
                         file=shown, line=1)
    currency = str(data.get("currency", "USD"))
    lines = _row_lines(node)
    rows: dict[str, Price] = {}
    for i, r in enumerate(data["rows"]):
        line = lines[i] if i < len(lines) else None
        if not isinstance(r, dict):
            raise InputError(f"rows[{i}]: expected a mapping (gpu, usd_per_gpu_hour, ...)", file=shown, line=line)
        name = r.get("gpu")
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"rows[{i}].gpu: expected a GPU name, found {name!r}", file=shown, line=line)
        try:
            gpu = lookup_gpu(name)
        except OomguardError as exc:
            raise InputError(f"rows[{i}].gpu: {exc}", file=shown, line=line) from None
        price = r.get("usd_per_gpu_hour")
        if isinstance(price, bool) or not isinstance(price, (int, float)) or not math.isfinite(price) or not 0 <= price <= MAX_PRICE:
            raise InputError(f"rows[{i}].usd_per_gpu_hour: expected a price from 0 (owned) to {MAX_PRICE:g}, found {price!r}",
                             file=shown, line=line)
        date = r.get("date", "")
        if isinstance(date, (datetime.date, datetime.datetime)):
            date = date.isoformat()
        if gpu.name in rows:
            raise InputError(f"rows[{i}]: {gpu.name} is priced twice (also line {rows[gpu.name].line})", file=shown, line=line)
        rows[gpu.name] = Price(gpu.name, float(price), str(date or ""), str(r.get("source") or ""), str(r.get("tier") or ""), line)
    if not rows:
        raise InputError("the price table has no rows", file=shown, line=1)
    return PriceTable(rows, shown, currency)


def _row_lines(node: Any) -> list[int]:
    for kn, vn in getattr(node, "value", None) or []:
        if getattr(kn, "value", None) == "rows" and isinstance(getattr(vn, "value", None), list):
            return [item.start_mark.line + 1 for item in vn.value]
    return []
