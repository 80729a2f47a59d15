"""Read safetensors headers (never the tensors) for exact weight bytes.

A safetensors file starts with an 8-byte little-endian header length and a
JSON header mapping tensor names to dtype, shape and byte offsets.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

from oomguard.errors import InputError

DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1, "U32": 4, "U16": 2, "F4": 0.5,
}
FLOAT_DTYPES = {"F64", "F32", "F16", "BF16"}
_MAX_HEADER = 100 * 1024 * 1024


@dataclass
class TensorStats:
    """Parameter counts by tensor group, enough to price weights per rank."""

    float_params: int = 0  # F16/BF16/F32 tensors: loaded in the model dtype
    other_bytes: int = 0  # quantized / integer tensors: loaded as stored
    by_group: dict = field(default_factory=dict)  # "vision" / "mtp" / "text" -> (float_params, other_bytes)
    files: int = 0

    def add(self, group: str, dtype: str, numel: int) -> None:
        f, o = self.by_group.get(group, (0, 0))
        if dtype in FLOAT_DTYPES:
            self.float_params += numel
            f += numel
        else:
            b = int(numel * DTYPE_BYTES.get(dtype, 1))
            self.other_bytes += b
            o += b
        self.by_group[group] = (f, o)


def _group_of(name: str) -> str:
    low = name.lower()
    if any(k in low for k in ("visual", "vision", "audio", "embed_vision", "multi_modal_projector", "mm_projector")):
        return "vision"
    if low.startswith("mtp.") or ".mtp." in low or "model.mtp" in low:
        return "mtp"
    return "text"


def read_header(path: Path) -> dict:
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) < 8:
            raise InputError("truncated safetensors file (no header)", file=str(path))
        (n,) = struct.unpack("<Q", raw)
        if n <= 0 or n > _MAX_HEADER:
            raise InputError(f"not a safetensors file (header length {n})", file=str(path))
        data = fh.read(n)
    try:
        header = json.loads(data)
    except ValueError as exc:
        raise InputError(f"safetensors header is not JSON: {exc}", file=str(path)) from None
    if not isinstance(header, dict):
        raise InputError("safetensors header is not a JSON object", file=str(path))
    return header


def scan_dir(directory: Path) -> TensorStats | None:
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        return None
    stats = TensorStats(files=len(files))
    for f in files:
        for name, info in read_header(f).items():
            if name == "__metadata__" or not isinstance(info, dict):
                continue
            numel = 1
            for d in info.get("shape", []):
                numel *= int(d)
            stats.add(_group_of(name), str(info.get("dtype")), numel)
    return stats
