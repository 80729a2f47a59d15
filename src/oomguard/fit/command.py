"""Turn a candidate's flags into a ready ``vllm serve`` command, and diff it against a launch.

Flags are keyed by vLLM's ``dest`` names (``max_num_batched_tokens``); the
option is ``--`` plus the dest with dashes. Booleans become ``--x`` /
``--no-x`` (vLLM ≥ 0.10 pairs every boolean with its ``--no-`` form; older
releases spell ``enable_*`` off as ``--disable-*``). JSON values are single
quoted so the command pastes into a shell script as is.
"""

from __future__ import annotations

import json
import math
import shlex

from oomguard.records import NamedTuple
from oomguard.units import GiB, MiB

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any

# Flags fit searches; everything else a --from launch sets is carried over untouched.
SEARCHED = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "kv_cache_dtype",
    "enforce_eager",
    "max_num_batched_tokens",
    "max_num_seqs",
    "gpu_memory_utilization",
    "max_model_len",
    "kv_cache_memory_bytes",
    "kv_offloading_size",
)
# Shown first, in this order, so commands read the same from one candidate to the next.
_ORDER = SEARCHED + ("kv_offloading_backend", "kv_transfer_config")
_SIZE_FLAGS = {"kv_cache_memory_bytes"}
ENV_LONG_LEN = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"


def option_name(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def size_text(n_bytes: int) -> str:
    """vLLM's human-readable ints: upper-case suffixes are binary (``10G`` = 10 GiB)."""
    if n_bytes and n_bytes % GiB == 0:
        return f"{n_bytes // GiB}G"
    if n_bytes and n_bytes % MiB == 0:
        return f"{n_bytes // MiB}M"
    return str(int(n_bytes))


def value_text(dest: str, value: Any) -> str:
    if dest in _SIZE_FLAGS and isinstance(value, int):
        return size_text(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (dict, list)) and not (isinstance(value, list) and all(isinstance(x, (str, int, float)) for x in value)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def flag_words(dest: str, value: Any, version: tuple[int, int, int] = (0, 33, 0)) -> list[str]:
    """One flag as ``vllm serve`` words, spelled by the version's flag table (``inputs.render``)."""
    from oomguard.inputs.render import flags_to_argv

    if dest in _SIZE_FLAGS and isinstance(value, int):
        value = size_text(value)
    return flags_to_argv(None, {dest: value}, version=".".join(map(str, version)))


def render(model: str, flags: dict, env: dict | None = None, *, version: tuple[int, int, int] = (0, 33, 0), program: str = "vllm serve",
           launch_flags: dict | None = None) -> str:
    """``[ENV=..] vllm serve MODEL --flag value ...``, shell-quoted.

    A ``--from`` edit keeps the launch's own order and spelling (``launch_flags``: the flags as the
    launch wrote them, in its order): its flags where they were, a changed value in place, added
    flags after them. A launch fit builds from nothing lists the searched flags first.
    Spellings come from the version's flag table (``oomguard.inputs.render``).
    Credentials (``--api-key`` …) are never written: the command reads them
    from an environment variable (vLLM itself reads ``VLLM_API_KEY``).
    """
    from oomguard.inputs.render import flags_to_argv, is_secret_dest, secret_env_for

    own = [k for k in (launch_flags or {}) if k in flags]
    keys = own + [k for k in _ORDER if k in flags and k not in own] + sorted(k for k in flags if k not in _ORDER and k not in own)
    same = launch_flags or {}

    def shown(k):
        v = flags[k]
        if k in _SIZE_FLAGS and isinstance(v, int) and same.get(k) != v:
            return size_text(v)  # a size fit chose reads as one; the launch's own number stays as written
        return v

    ordered = {k: shown(k) for k in keys}
    secrets = [k for k in ordered if is_secret_dest(k)]
    argv = flags_to_argv(None, ordered, version=".".join(map(str, version)), drop_secrets=True)
    envs = [f"{k}={shlex.quote(str(val))}" for k, val in sorted((env or {}).items())]
    # `vllm serve` takes the model as a positional; the python entry points want --model
    head = [program, shlex.quote(model)] if program == "vllm serve" else [program, "--model", shlex.quote(model)]
    parts = envs + head + [shlex.quote(w) for w in argv]
    for k in secrets:
        if k != "api_key":  # vLLM reads VLLM_API_KEY when --api-key is absent
            parts += [option_name(k), f'"${secret_env_for(k)}"']
    return " ".join(parts)


class Change(NamedTuple):
    """One flag (or environment variable) a --from edit changes."""

    dest: str
    old: Any  # None: not set in the launch
    new: Any  # None: removed
    old_effective: Any  # what vLLM used when the flag was unset (its default)
    file: str | None = None
    line: int | None = None
    is_env: bool = False

    @property
    def option(self) -> str:
        return self.dest if self.is_env else option_name(self.dest)

    def describe(self) -> str:
        where = f" ({self.file}:{self.line})" if self.file and self.line else (f" ({self.file})" if self.file else "")
        if self.is_env:
            return f"set {self.dest}={self.new}" if self.new is not None else f"unset {self.dest}"
        if self.new is None:
            return f"remove {self.option} {value_text(self.dest, self.old)}{where}"
        if isinstance(self.old, dict) and isinstance(self.new, dict):
            diffs = [f"{k} {o} → {n}" for k, o, n in _leaf_diff(self.old, self.new)]
            return f"{self.option}: {'; '.join(diffs)}{where}"
        new = value_text(self.dest, self.new) if not isinstance(self.new, bool) else ("on" if self.new else "off")
        if self.old is None:
            eff = self.old_effective
            shown = ("on" if eff else "off") if isinstance(eff, bool) else (None if eff is None else value_text(self.dest, eff))
            default = "" if shown is None else f" (default {shown})"
            return f"add {' '.join(flag_words(self.dest, self.new))}{default}"
        old = value_text(self.dest, self.old) if not isinstance(self.old, bool) else ("on" if self.old else "off")
        return f"{self.option} {old} → {new}{where}"

    def to_dict(self) -> dict:
        return {
            "flag": self.option,
            "dest": self.dest,
            "old": self.old,
            "new": self.new,
            "default": self.old_effective if self.old is None else None,
            "file": self.file,
            "line": self.line,
            "text": self.describe(),
        }


def _leaf_diff(old: dict, new: dict, prefix: str = ""):
    for k in sorted(set(old) | set(new)):
        o, n = old.get(k), new.get(k)
        if isinstance(o, dict) and isinstance(n, dict):
            yield from _leaf_diff(o, n, prefix + k + ".")
        elif o != n:
            yield prefix + k, o, n


def magnitude(change: Change) -> float:
    """How big one change is, on a common scale (1.0 ≈ a categorical switch or a 16× change).

    Lowering ``max_model_len`` gives up part of what the launch was for, so it
    weighs more than tuning the engine around it.
    """
    old = change.old if change.old is not None else change.old_effective
    new = change.new
    if change.is_env:
        return 0.5
    if change.dest == "kv_cache_dtype" and str(new).startswith("fp8") and not str(old).startswith("fp8"):
        return 1.5  # a switch that also costs accuracy
    if old is None or new is None or isinstance(new, (bool, str)) or isinstance(old, (bool, str)):
        return 1.0
    try:
        o, n = float(old), float(new)
    except (TypeError, ValueError):
        return 1.0
    if change.dest == "gpu_memory_utilization":
        return abs(n - o) / 0.1
    if o <= 0 or n <= 0:
        return 1.0
    m = abs(math.log2(n / o)) / 4
    if change.dest == "max_model_len" and n < o:
        m += 2.0
    return m
