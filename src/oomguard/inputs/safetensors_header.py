"""Read safetensors headers (never the tensors) for exact weight bytes.

A safetensors file starts with an 8-byte little-endian header length and a
JSON header mapping tensor names to dtype, shape and byte offsets.
"""

from __future__ import annotations

import os
import struct

from oomguard.errors import InputError
from oomguard.records import field, record

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from pathlib import Path

DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1, "U32": 4, "U16": 2, "F4": 0.5,
}
FLOAT_DTYPES = {"F64", "F32", "F16", "BF16"}
_MAX_HEADER = 100 * 1024 * 1024


@record
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


def read_header(path: str | Path) -> dict:
    """The JSON header of one safetensors file (only its first 8 + N bytes are read)."""
    from oomguard.inputs import files
    from oomguard.inputs.structured import load_json

    head = files.read_prefix(path, 8, what="safetensors")
    if len(head) < 8:
        raise InputError("truncated safetensors file (no header)", file=str(path))
    (n,) = struct.unpack("<Q", head)
    if n <= 1 or n > _MAX_HEADER:
        raise InputError(f"not a safetensors file (header length {n})", file=str(path))
    data = files.read_prefix(path, 8 + n, what="safetensors")[8:]
    if len(data) < n:
        raise InputError(f"truncated safetensors file (header says {n} bytes, file has {len(data)})", file=str(path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("safetensors header is not UTF-8 JSON", file=str(path)) from None
    header = load_json(text, file=str(path), what="safetensors header")
    if not isinstance(header, dict):
        raise InputError("safetensors header is not a JSON object", file=str(path))
    return header


def _numel(name: str, info: dict, path: str | Path) -> int:
    shape = info.get("shape", [])
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 1 << 48
                                              for d in shape):
        raise InputError(f"safetensors header: tensor {name[:80]!r} has an invalid shape {str(shape)[:60]}",
                         file=str(path))
    numel = 1
    for d in shape:
        numel *= d
    if numel >= 1 << 50:  # 10^15 elements: no checkpoint holds a tensor a million times larger than any GPU
        raise InputError(f"safetensors header: tensor {name[:80]!r} has an implausible shape {shape}", file=str(path))
    return numel


def scan_dir(directory: str | Path) -> TensorStats | None:
    from oomguard.inputs import files

    found = [os.path.join(directory, name) for name in files.list_names(directory, "model directory")
             if name.endswith(".safetensors")]
    if not found:
        return None
    stats = TensorStats(files=len(found))
    for f in found:
        for name, info in read_header(f).items():
            if name == "__metadata__" or not isinstance(info, dict):
                continue
            stats.add(_group_of(name), str(info.get("dtype")), _numel(name, info, f))
    return stats
