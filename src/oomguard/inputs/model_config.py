"""Find and read a model's config: a file, a directory, the HF cache, the bundled catalog or the Hub.

``load_model(spec)`` is the one entry point. It reads files only (headers of
safetensors, never tensors), and hands the dictionaries to
``oomguard.model.architectures.describe``.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from oomguard.errors import InputError
from oomguard.model.description import ModelDescription

_MAX_CONFIG_BYTES = 20 * 1024 * 1024
CATALOG_DIR = Path(__file__).resolve().parent.parent / "data" / "models"


def read_json(path: Path) -> dict:
    """Read a JSON object, refusing binaries and giant files with one clear line."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=str(path)) from None
    if size > _MAX_CONFIG_BYTES:
        raise InputError(f"not a config file ({size / 2**20:.0f} MiB; configs are a few KiB)", file=str(path))
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=str(path)) from None
    if b"\x00" in raw[:4096]:
        raise InputError("binary file, expected a JSON config", file=str(path))
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text, expected a JSON config", file=str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg} (column {exc.colno})", file=str(path), line=exc.lineno) from None
    if not isinstance(data, dict):
        raise InputError("expected a JSON object at the top level", file=str(path))
    return data


def catalog_ids() -> list[str]:
    if not CATALOG_DIR.is_dir():
        return []
    return sorted(p.name.replace("__", "/", 1) for p in CATALOG_DIR.iterdir() if p.is_dir())


def _catalog_dir(model_id: str) -> Path | None:
    slug = model_id.strip().strip("/").replace("/", "__", 1)
    exact = CATALOG_DIR / slug
    if exact.is_dir():
        return exact
    low = slug.lower()
    for p in CATALOG_DIR.iterdir() if CATALOG_DIR.is_dir() else []:
        if p.name.lower() == low or p.name.lower().split("__", 1)[-1] == low:
            return p
    return None


def _hf_cache_dir(model_id: str) -> Path | None:
    if "/" not in model_id:
        return None
    hub = os.environ.get("HF_HUB_CACHE")
    if not hub:
        home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
        hub = os.path.join(home, "hub")
    repo = Path(hub) / ("models--" + model_id.replace("/", "--"))
    snaps = repo / "snapshots"
    if not snaps.is_dir():
        return None
    ref = repo / "refs" / "main"
    if ref.is_file():
        cand = snaps / ref.read_text().strip()
        if (cand / "config.json").is_file():
            return cand
    for cand in sorted(snaps.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True):
        if (cand / "config.json").is_file():
            return cand
    return None


def _config_file_in(directory: Path) -> Path:
    cfg = directory / "config.json"
    if cfg.is_file():
        return cfg
    # Catalog folders sometimes hold a re-saved variant under another name.
    others = sorted(directory.glob("*.json"))
    others = [p for p in others if p.name not in ("hf_quant_config.json", "tokenizer_config.json", "generation_config.json")]
    if others:
        return others[0]
    raise InputError("no config.json in the model directory", file=str(directory))


def _from_dir(directory: Path, source: str, name: str) -> ModelDescription:
    from oomguard.inputs.safetensors_header import scan_dir
    from oomguard.model.architectures import describe

    cfg_path = _config_file_in(directory)
    config = read_json(cfg_path)
    hq_path = directory / "hf_quant_config.json"
    hf_quant = read_json(hq_path) if hq_path.is_file() else None
    desc = replace(describe(config, source=source, name=name, hf_quant=hf_quant), config_path=str(cfg_path))
    stats = scan_dir(directory)
    if stats is not None:
        desc = replace(
            desc,
            checkpoint_bytes=stats.float_params * desc.dtype_bytes + stats.other_bytes,
            checkpoint_dtype_bytes={k: list(v) for k, v in stats.by_group.items()},
        )
    return desc


def load_model(spec: str, *, allow_hub: bool = True) -> ModelDescription:
    """Resolve ``spec`` (path, HF id in cache, catalog id, or Hub id) to a description."""
    from oomguard.model.architectures import describe

    if not spec:
        raise InputError("no model given (use --model PATH|HF_ID or name it in the launch)")
    path = Path(os.path.expanduser(spec))
    if path.is_file():
        config = read_json(path)
        hq = path.with_name("hf_quant_config.json")
        hf_quant = read_json(hq) if hq.is_file() and hq != path else None
        desc = describe(config, source=str(path), name=path.parent.name or path.stem, hf_quant=hf_quant)
        return replace(desc, config_path=str(path))
    if path.is_dir():
        return _from_dir(path, str(path), path.name)
    cached = _hf_cache_dir(spec)
    if cached is not None:
        return _from_dir(cached, f"HF cache: {spec}", spec)
    cat = _catalog_dir(spec)
    if cat is not None:
        return _from_dir(cat, f"catalog: {cat.name.replace('__', '/', 1)}", cat.name.replace("__", "/", 1))
    if spec.startswith(("/", "./", "../", "~")):
        raise InputError(f"model path does not exist: {spec}")
    if allow_hub and "/" in spec and os.environ.get("HF_HUB_OFFLINE", "0") in ("0", "", "false", "False"):
        return _from_hub(spec)
    raise InputError(f"model {spec!r} not found as a path, in the HF cache or in the bundled catalog"
                     f"{_did_you_mean(spec)}")


def close_catalog_ids(spec: str, n: int = 3) -> list[str]:
    """Catalog ids that look like ``spec``. Shared name tokens count most ("3.1", "70b",
    "instruct"), so a size or version match beats a near-identical spelling of another size."""
    import difflib
    import re

    def tokens(text: str) -> set[str]:
        return set(re.findall(r"\d+(?:\.\d+)*[a-z]?|[a-z]+", text.lower()))

    want = tokens(spec)
    want_name = spec.split("/", 1)[-1].lower()
    scored = []
    for cid in catalog_ids():
        have = tokens(cid)
        overlap = len(want & have) / max(1, len(want | have))
        sizes = {t for t in want if re.fullmatch(r"\d+(?:\.\d+)?b", t)}
        size_bonus = 0.3 if sizes and sizes <= have else (-0.3 if sizes else 0.0)
        ratio = difflib.SequenceMatcher(None, want_name, cid.split("/", 1)[-1].lower()).ratio()
        scored.append((overlap + size_bonus + 0.5 * ratio, cid))
    scored.sort(reverse=True)
    return [cid for score, cid in scored[:n] if score >= 0.6]


def _did_you_mean(spec: str) -> str:
    close = close_catalog_ids(spec)
    if close:
        return f"; did you mean {' or '.join(close)}? (`oomguard models` lists the catalog)"
    return "; `oomguard models` lists the bundled catalog"


def _from_hub(model_id: str) -> ModelDescription:
    try:
        from huggingface_hub import hf_hub_download  # optional dependency
    except ImportError:
        raise InputError(
            f"model {model_id!r} is not local and not in the bundled catalog{_did_you_mean(model_id)}; "
            "or pass its config.json (--model PATH), or install oomguard[hub] to fetch it"
        ) from None
    from oomguard.model.architectures import describe

    try:
        cfg_path = Path(hf_hub_download(model_id, "config.json"))
    except Exception as exc:  # network, auth, 404: all one line for the user
        raise InputError(f"could not fetch config.json of {model_id!r} from the Hub: {exc.__class__.__name__}") from None
    hf_quant = None
    try:
        hf_quant = read_json(Path(hf_hub_download(model_id, "hf_quant_config.json")))
    except Exception:
        pass
    return describe(read_json(cfg_path), source=f"Hub: {model_id}", name=model_id, hf_quant=hf_quant)
