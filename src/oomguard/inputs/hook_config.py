"""``.oomguard.yaml``: per-path settings for ``oomguard check --hook`` (the pre-commit hook).

One small file at the repository root says, for the launches under each path, which GPU, model
config and vLLM release to check them against::

    gpu: A100-80GB                 # defaults for every launch
    vllm_version: 0.11.0
    paths:                         # later entries override earlier ones, key by key
      - glob: deploy/prod/**
        gpu: H100
        num_gpus: 8
      - glob: deploy/qwen/*.sh
        model: models/qwen3-8b/config.json
      - glob: charts/redis/**
        skip: true

Precedence, lowest first: the file's top level, the hook's ``args:``, the matching ``paths``
entries in order. Globs are matched against the path relative to the repository root (``**``
crosses directories, ``*`` does not). Unknown keys are bad input (one line naming the key).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oomguard.errors import InputError

CONFIG_NAME = ".oomguard.yaml"
# key -> check option (dest of `oomguard check`'s parser)
SETTINGS = {
    "gpu": "gpu",
    "gpu_memory_gib": "gpu_memory_gib",
    "num_gpus": "num_gpus",
    "model": "og_model",
    "vllm_version": "vllm_version",
    "host_ram_gib": "host_ram_gib",
    "other_gpu_use_gib": "other_gpu_use_gib",
    "usage": "usage",
    "strict": "strict",
    "ignore": "ignore",
    "avg_input_len": "avg_input_len",
    "concurrency": "concurrency",
}
PATH_ONLY = ("glob", "skip")


@dataclass
class HookConfig:
    path: str | None = None
    defaults: dict[str, Any] = field(default_factory=dict)
    entries: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (glob, settings incl. skip)

    def for_path(self, rel: str, args: dict[str, Any]) -> dict[str, Any]:
        """Settings for one file: the file's defaults, then the hook's args, then each matching entry."""
        out = {**self.defaults, **args}
        for glob, settings in self.entries:
            if glob_match(rel, glob):
                out.update(settings)
        return out


def glob_match(rel: str, glob: str) -> bool:
    """``**`` any number of directories, ``*`` / ``?`` within one path component."""
    rel = rel.replace("\\", "/").lstrip("./") if rel.startswith("./") else rel.replace("\\", "/")
    rx = ""
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            rx += "(?:.*/)?"
            i += 3
        elif glob.startswith("**", i):
            rx += ".*"
            i += 2
        elif glob[i] == "*":
            rx += "[^/]*"
            i += 1
        elif glob[i] == "?":
            rx += "[^/]"
            i += 1
        else:
            rx += re.escape(glob[i])
            i += 1
    return re.fullmatch(rx, rel) is not None or (not any(c in glob for c in "*?[") and rel.startswith(glob.rstrip("/") + "/"))


def _settings(raw: Any, where: str, file: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a mapping of settings", file=file)
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key in PATH_ONLY and key in allowed:
            out[key] = value
            continue
        if key not in SETTINGS:
            known = ", ".join([*SETTINGS, *allowed])
            close = fnmatch.filter(list(SETTINGS), f"*{str(key)[:3]}*")
            raise InputError(f"{where}: unknown key {key!r}" + (f" (did you mean {close[0]}?)" if close else "") + f"; known: {known}", file=file)
        if key == "ignore":
            value = [value] if isinstance(value, str) else value
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise InputError(f"{where}: ignore takes a rule id or a list of them", file=file)
        elif key == "strict":
            if not isinstance(value, bool):
                raise InputError(f"{where}: strict takes true or false", file=file)
        elif isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise InputError(f"{where}: {key} takes one value, got {type(value).__name__}", file=file)
        out[SETTINGS[key]] = value
    return out


def read_hook_config(path: str | Path | None) -> HookConfig:
    """The config file's settings (an empty config when there is none)."""
    from oomguard.inputs import files
    from oomguard.inputs.structured import load_yaml

    if path is None or not files.is_file(path):
        return HookConfig()
    file = str(path)
    text = files.read_text(path, limit=files.LAUNCH_BYTES, what="hook config", strict=True)
    data = load_yaml(text, file=file)
    if data is None:
        return HookConfig(path=file)
    if not isinstance(data, dict):
        raise InputError("expected a mapping (gpu:, model:, paths: ...)", file=file, line=1)
    entries_raw = data.pop("paths", None) or []
    if not isinstance(entries_raw, list):
        raise InputError("paths: expected a list of {glob: ..., gpu: ...} entries", file=file)
    cfg = HookConfig(path=file, defaults=_settings(data, "top level", file, ()))
    for i, entry in enumerate(entries_raw, 1):
        s = _settings(entry, f"paths[{i}]", file, PATH_ONLY)
        glob = s.pop("glob", None)
        if not isinstance(glob, str) or not glob:
            raise InputError(f"paths[{i}]: glob is required (e.g. glob: deploy/prod/**)", file=file)
        if "skip" in s and not isinstance(s["skip"], bool):
            raise InputError(f"paths[{i}]: skip takes true or false", file=file)
        cfg.entries.append((glob, s))
    return cfg
