"""Find and read a model's config: a file, a directory, the HF cache, the bundled catalog or the Hub.

``load_model(spec)`` is the one entry point. It reads files only (headers of
safetensors, never tensors), and hands the dictionaries to
``oomguard.model.architectures.describe``.
"""

from __future__ import annotations

import math
import os

from oomguard.errors import InputError
import oomguard.lazy_re as lazy_re
from oomguard.inputs import files
from oomguard.inputs.config_defaults import PLAN_FIELDS
from oomguard.model.description import LayerKind, ModelDescription

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from pathlib import Path

_MAX_CONFIG_BYTES = 20 * 1024 * 1024
# A string, not a Path: a plan of a catalog model needs no pathlib (with urllib.parse and ipaddress, ~3 ms).
CATALOG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "data", "models")


def read_json(path: str | Path) -> dict:
    """Read a JSON object, refusing binaries, giant files and deep nesting with one clear line."""
    from oomguard.inputs.structured import load_json

    raw = files.read_bytes(path, limit=_MAX_CONFIG_BYTES, what="config",
                           too_large="not a config file ({size}; configs are a few KiB)")
    if b"\x00" in raw[:4096]:
        raise InputError("binary file, expected a JSON config", file=str(path))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text, expected a JSON config", file=str(path)) from None
    data = load_json(text, file=str(path))
    if not isinstance(data, dict):
        raise InputError("expected a JSON object at the top level", file=str(path))
    validate_config(data, file=str(path))
    return data


# Structural fields the memory model multiplies together, with the largest value any real model has
# times a wide margin (hidden sizes are < 2**15, vocabularies < 2**20, contexts < 2**27 today).
_DIM_MAX = 1 << 24
_COUNT_MAX = 1 << 20
_LEN_MAX = 1 << 40
_POSITIVE_FIELDS = {
    **dict.fromkeys(("hidden_size", "n_embd", "d_model", "head_dim", "vocab_size", "moe_intermediate_size",
                     "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "hidden_dim"), _DIM_MAX),
    **dict.fromkeys(("num_hidden_layers", "n_layer", "num_layers", "num_attention_heads", "n_head",
                     "num_key_value_heads", "n_head_kv", "num_kv_heads", "multi_query_group_num",
                     "num_attention_groups", "n_routed_experts", "num_experts", "num_local_experts",
                     "num_experts_per_tok", "moe_topk", "moe_layer_freq", "decoder_sparse_step",
                     "mm_tokens_per_image", "num_channels"), _COUNT_MAX),
    **dict.fromkeys(("image_size", "patch_size"), _DIM_MAX),
    # the sizes the Falcon-H1 / Zamba2, Whisper and CLIP/SigLIP adapters multiply
    **dict.fromkeys(("projection_dim", "projection_size", "spatial_merge_size", "mamba_d_state", "mamba_n_heads", "mamba_d_conv", "attention_head_dim",
                     "attention_hidden_size", "num_mel_bins"), _DIM_MAX),
    **dict.fromkeys(("encoder_layers", "decoder_layers", "encoder_attention_heads", "decoder_attention_heads"),
                    _COUNT_MAX),
    "max_source_positions": _LEN_MAX,
    **dict.fromkeys(("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                     "max_sequence_length"), _LEN_MAX),
}
_NON_NEGATIVE_FIELDS = {
    **dict.fromkeys(("intermediate_size", "ffn_dim", "q_lora_rank", "sliding_window"), _DIM_MAX),
    **dict.fromkeys(("n_shared_experts", "first_k_dense_replace", "num_nextn_predict_layers"), _COUNT_MAX),
}
_SUB_CONFIGS = ("text_config", "llm_config", "language_config", "vision_config", "audio_config")
# What the plan reads at the top level and in each sub-config: the scalar fields
# (config_defaults.PLAN_FIELDS), and the structures the adapters walk.
_STRUCTURES = ("rope_scaling", "rope_parameters", "quantization_config", "layer_types", "mlp_only_layers")
_READ_FIELDS = frozenset(PLAN_FIELDS) | frozenset(_STRUCTURES)


def validate_config(data: dict, *, file: str | None = None) -> None:
    """Refuse values no real config.json holds in the fields the plan reads, naming the field:
    NaN/Infinity, and structural sizes that are not integers or are zero, negative or absurdly
    large (they feed the arithmetic). Fields the plan never reads are not judged: a Mamba config's
    ``time_step_limit: [0.0, Infinity]`` is as valid to vLLM as to us."""
    scopes: list[tuple[str, dict]] = [("", data)]
    scopes += [(k + ".", data[k]) for k in _SUB_CONFIGS if isinstance(data.get(k), dict)]
    for prefix, cfg in scopes:
        for name, value in cfg.items():
            if name in _READ_FIELDS:
                _finite(value, prefix + name, file)
    for prefix, cfg in scopes:
        for name, value in cfg.items():
            if value is None:
                continue
            if name in _POSITIVE_FIELDS:
                _integer_field(prefix + name, value, 1, _POSITIVE_FIELDS[name], file)
            elif name in _NON_NEGATIVE_FIELDS:
                _integer_field(prefix + name, value, 0, _NON_NEGATIVE_FIELDS[name], file)
        _shapes(prefix, cfg, file)


_ROPE_FACTOR_MAX = 1 << 20  # published scalings are 2-64; a million times any native context is past _LEN_MAX


def _shapes(prefix: str, cfg: dict, file: str | None) -> None:
    """Fields that are not plain sizes but still feed the arithmetic: lists and nested objects."""
    arch = cfg.get("architectures")
    if arch is not None and not (isinstance(arch, list) and all(isinstance(a, str) for a in arch)):
        raise InputError(f"config field {prefix}architectures: expected a list of class names, found {_shown(arch)}",
                         file=file)
    layers = cfg.get("mlp_only_layers")
    if layers is not None and not (isinstance(layers, list) and all(isinstance(x, int) and not isinstance(x, bool)
                                                                    for x in layers)):
        raise InputError(f"config field {prefix}mlp_only_layers: expected a list of layer indices, "
                         f"found {_shown(layers)}", file=file)
    cross = cfg.get("cross_attention_layers")
    if cross is not None:
        # indices into the decoder's layers (mllama): one outside them names a layer the model does not have
        n = cfg.get("num_hidden_layers")
        n = n if isinstance(n, int) and not isinstance(n, bool) else None
        bad = not isinstance(cross, list) or next(
            (x for x in cross if isinstance(x, bool) or not isinstance(x, int) or x < 0 or (n is not None and x >= n)),
            None) is not None
        if bad or len(set(cross)) != len(cross):
            raise InputError(f"config field {prefix}cross_attention_layers: expected distinct layer indices "
                             f"0-{n - 1 if n else '…'}, found {_shown(cross)}", file=file)
    for key in ("rope_scaling", "rope_parameters", "quantization_config"):
        sub = cfg.get(key)
        if sub is not None and not isinstance(sub, dict):
            raise InputError(f"config field {prefix}{key}: expected an object, found {_shown(sub)}", file=file)
    for key in ("rope_scaling", "rope_parameters"):
        rope = cfg.get(key) or {}
        factor = rope.get("factor")
        if factor is not None and (isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor > 0):
            raise InputError(f"config field {prefix}{key}.factor: {_shown(factor)} is not a positive number",
                             file=file)
        if factor is not None and factor > _ROPE_FACTOR_MAX:  # multiplies the native context into max_model_len
            raise InputError(f"config field {prefix}{key}.factor: {_shown(factor)} is implausibly large "
                             f"(at most {_ROPE_FACTOR_MAX:,})", file=file)
        orig = rope.get("original_max_position_embeddings")
        if orig is not None:  # multiplied by the factor into the derived max_model_len
            _integer_field(f"{prefix}{key}.original_max_position_embeddings", orig, 1, _LEN_MAX, file)
        _magnitudes(f"{prefix}{key}.", rope, file, every_field=True)
    quant = cfg.get("quantization_config") or {}
    for name, low, high in (("bits", 1, 64), ("w_bit", 1, 64), ("group_size", -1, _DIM_MAX), ("q_group_size", -1, _DIM_MAX)):
        if quant.get(name) is not None:  # the weight bytes are bits x params / group
            _integer_field(f"{prefix}quantization_config.{name}", quant[name], low, high, file)
    _magnitudes(f"{prefix}quantization_config.", quant, file, every_field=True)
    _magnitudes(prefix, cfg, file)
    block = (cfg.get("quantization_config") or {}).get("weight_block_size")
    if block is not None and not (isinstance(block, list) and len(block) == 2
                                  and all(isinstance(b, int) and not isinstance(b, bool) and 0 < b <= _DIM_MAX
                                          for b in block)):
        raise InputError(f"config field {prefix}quantization_config.weight_block_size: expected two positive "
                         f"integers, found {_shown(block)}", file=file)


# Any number a config holds at the levels the memory model reads (the top, a sub-config, its
# rope_scaling and quantization_config) is a size, a count, a ratio or an epsilon: none is
# larger than 2**53, where doubles stop being exact. A larger one is refused rather than let
# into products that overflow (1e308 x a factor is infinity). Tokenizer-style "unbounded"
# sentinels are the exception (transformers writes model_max_length = 1e30 for "no limit").
_MAGNITUDE_MAX = float(1 << 53)
_UNBOUNDED_OK = {"model_max_length"}


def _magnitudes(prefix: str, cfg: dict, file: str | None, *, every_field: bool = False) -> None:
    for name, value in cfg.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or name in _UNBOUNDED_OK:
            continue
        if not every_field and name not in _READ_FIELDS:
            continue  # a field the plan never reads (rope_theta, time-step bounds, ...)
        if abs(value) > _MAGNITUDE_MAX:
            raise InputError(f"config field {prefix}{name}: {_shown(value)} is implausibly large for a model config "
                             f"(at most {_MAGNITUDE_MAX:.3g})", file=file)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def _integer_field(name: str, value: object, low: int, high: int, file: str | None) -> None:
    # A list is a per-layer size (OpenELM's num_query_heads, Gemma-3n's intermediate_size) or an
    # [h, w] image size: a valid config, each entry checked; whether an adapter reads it is the
    # adapter's to say (the generic path refuses per-layer sizes, exit 3).
    if isinstance(value, list) and 0 < len(value) <= 1 << 16:
        for i, v in enumerate(value):
            _integer_field(f"{name}[{i}]", v, low, high, file)
        return
    ok = (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())
    if not ok:
        raise InputError(f"config field {name}: {_shown(value)} is not an integer", file=file)
    if value < low:
        raise InputError(f"config field {name}: {_shown(value)} must be {'positive' if low else 'at least 0'}", file=file)
    if value > high:
        raise InputError(f"config field {name}: {_shown(value)} is implausibly large (at most {high:,})", file=file)


def _finite(value: object, where: str, file: str | None) -> None:
    stack: list[tuple[object, str]] = [(value, where)]
    while stack:
        v, at = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            raise InputError(f"config field {at or '(top level)'}: {v!r} is not a finite number", file=file)
        if isinstance(v, dict):
            stack.extend((c, f"{at}.{k}" if at else str(k)) for k, c in v.items())
        elif isinstance(v, list):
            stack.extend((c, f"{at}[{i}]") for i, c in enumerate(v))


def _describe(config: dict, cfg_path: str | Path, **kwargs) -> ModelDescription:
    """``architectures.describe`` with its Python errors translated at the boundary.

    ``validate_config`` checks the fields every adapter multiplies; a field only one family reads
    (null where a size is needed, a list where a number is) still reaches the adapter, where reading it
    (``int(cfg["o_groups"])``) raises: that error is about this file, so it is reported as one line naming
    the file and the field. The same error raised anywhere else is a bug of oomguard's and is not hidden.
    """
    from oomguard.inputs.config_defaults import with_defaults
    from oomguard.model.architectures import describe

    # vLLM reads the file through AutoConfig: fields it omits take the config class's defaults.
    from oomguard.inputs.coverage_data import attach

    filled, applied = with_defaults(config)
    try:
        desc = describe(filled, **kwargs)
        _check_heads(desc, config, cfg_path)
        return attach(desc._replace(defaults_applied=tuple(applied)) if applied else desc)
    except KeyError as exc:
        raise InputError(f"config field {exc.args[0] if exc.args else '?'} is missing, and "
                         f"model_type {config.get('model_type')!r} needs it", file=str(cfg_path)) from None
    except (TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError, OverflowError) as exc:
        fields = _config_read_at(exc, filled)
        if fields is None:
            raise
        detail = str(exc)
        detail = detail if len(detail) <= 120 else detail[:120] + "…"
        what = f"config field {', '.join(fields)}: the wrong type or value" if fields else \
            "config has a field of the wrong type or value"
        raise InputError(f"{what} for model_type {config.get('model_type')!r} ({exc.__class__.__name__}: {detail})",
                         file=str(cfg_path)) from None


def _check_heads(desc: ModelDescription, config: dict, cfg_path: str | Path) -> None:
    """A head size an adapter derived as hidden // heads is 0 when the config gives more heads than
    hidden channels: every cache and weight term is then 0 (or divides by it). Refused here, once for
    every adapter, rather than planned as a model with no KV cache."""
    for i, layer in enumerate(desc.layers):
        if layer.kind in (LayerKind.MAMBA, LayerKind.NONE):
            continue
        if layer.head_size < 1 or (layer.kind is not LayerKind.MLA and layer.num_kv_heads < 1):
            what = f"head size {layer.head_size}" if layer.head_size < 1 else f"{layer.num_kv_heads} KV heads"
            raise InputError(f"config fields hidden_size, num_attention_heads: layer {i}'s attention comes to {what} "
                             f"for model_type {config.get('model_type')!r} (more heads than hidden channels?)",
                             file=str(cfg_path))


_ADAPTERS = os.sep + os.path.join("oomguard", "model", "architectures") + os.sep
_OOMGUARD = os.sep + "oomguard" + os.sep
_QUOTED_NAME = lazy_re.compile(r"""["']([A-Za-z_][A-Za-z0-9_]{0,80})["']""")  # an error's line only


def _config_read_at(exc: BaseException, config: dict) -> list[str] | None:
    """Where ``exc`` came from, when it came from an adapter reading the config: the config's fields that the
    failing line names (``[]`` when it names none of them); ``None`` when oomguard's own code raised it elsewhere
    (the innermost oomguard frame is not an adapter's)."""
    import linecache
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _OOMGUARD in f.filename]
    if not frames or _ADAPTERS not in frames[-1].filename:
        return None
    line = frames[-1].line or linecache.getline(frames[-1].filename, frames[-1].lineno or 0)
    scopes = [config] + [v for v in config.values() if isinstance(v, dict)]
    return sorted({name for name in _QUOTED_NAME.findall(line or "") if any(name in s for s in scopes)})


def describe_config(config: dict, *, source: str, name: str | None = None, hf_quant: dict | None = None,
                    force_generic: bool = False) -> ModelDescription:
    """A config already in memory, read exactly as a config.json file would be: validated, class
    defaults filled in, described (the registry sweep's comparison reads its stored configs so)."""
    if not isinstance(config, dict):
        raise InputError("expected a JSON object at the top level", file=source)
    from pathlib import Path

    validate_config(config, file=source)
    return _describe(config, Path(source), source=source, name=name or source, hf_quant=hf_quant,
                     force_generic=force_generic)


def catalog_ids() -> list[str]:
    if not files.is_dir(CATALOG_DIR):
        return []
    return sorted(name.replace("__", "/", 1) for name in files.list_names(CATALOG_DIR)
                  if files.is_dir(os.path.join(CATALOG_DIR, name)))


def _catalog_dir(model_id: str) -> str | None:
    slug = model_id.strip().strip("/").replace("/", "__", 1)
    # spelled as ``Path(CATALOG_DIR) / slug`` (empty and "." parts dropped): the folder's path reaches the output
    exact = os.path.join(CATALOG_DIR, *(part for part in slug.split("/") if part not in ("", ".")))
    if files.is_dir(exact):
        return exact
    low = slug.lower()
    for name in files.list_names(CATALOG_DIR) if files.is_dir(CATALOG_DIR) else []:
        if name.lower() == low or name.lower().split("__", 1)[-1] == low:
            return os.path.join(CATALOG_DIR, name)
    return None


def _hf_cache_dir(model_id: str) -> Path | None:
    if "/" not in model_id:
        return None
    hub = os.environ.get("HF_HUB_CACHE")
    if not hub:
        home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
        hub = os.path.join(home, "hub")
    folder = "models--" + model_id.replace("/", "--")
    if not files.is_dir(os.path.join(hub, folder, "snapshots")):  # not cached: no pathlib needed
        return None
    from pathlib import Path

    repo = Path(hub) / folder
    snaps = repo / "snapshots"
    if not files.is_dir(snaps):
        return None
    # A cache we cannot read is an error naming the folder, not a traceback and not "not cached".
    ref = repo / "refs" / "main"
    if files.is_file(ref):
        commit = files.read_text(ref, limit=files.SMALL_BYTES, what="HF cache ref").strip()
        if commit and "/" not in commit and commit not in (".", ".."):
            cand = snaps / commit
            if files.is_file(cand / "config.json"):
                return cand
    found = [c for c in files.list_dir(snaps, "HF cache") if files.is_file(c / "config.json")]

    def mtime(p: Path) -> float:
        try:
            return p.stat().st_mtime
        except OSError:
            return 0.0

    return max(found, key=mtime) if found else None


def _config_file_in(directory: str | Path) -> str | Path:
    cfg = os.path.join(directory, "config.json")
    if files.is_file(cfg) or os.path.lexists(cfg):
        return cfg  # not a regular file (a device, a FIFO, a dangling link): the reader says which
    # vLLM reads config.json and nothing else (a Mistral-format params.json is another loader's): another JSON here
    # is not read in its place, whatever its name. The catalog once read a 512-position re-save this way.
    others = sorted(p.name for p in files.list_dir(directory, "model directory") if p.suffix == ".json")
    held = f" (it holds {', '.join(others[:4])}{', ...' if len(others) > 4 else ''})" if others else ""
    raise InputError(f"no config.json in the model directory{held}", file=str(directory))


def _from_dir(directory: str | Path, source: str, name: str) -> ModelDescription:
    from oomguard.inputs.safetensors_header import scan_dir

    cfg_path = _config_file_in(directory)
    config = read_json(cfg_path)
    hq_path = os.path.join(directory, "hf_quant_config.json")
    hf_quant = read_json(hq_path) if files.is_file(hq_path) else None
    desc = _describe(config, cfg_path, source=source, name=name, hf_quant=hf_quant)._replace(config_path=str(cfg_path))
    stats = scan_dir(directory)
    if stats is not None:
        desc = desc._replace(
            checkpoint_bytes=stats.float_params * desc.dtype_bytes + stats.other_bytes,
            checkpoint_dtype_bytes={k: list(v) for k, v in stats.by_group.items()},
        )
    return desc


def load_model(spec: str, *, allow_hub: bool = True) -> ModelDescription:
    """Resolve ``spec`` (path, HF id in cache, catalog id, or Hub id) to a description."""
    if not spec:
        raise InputError("no model given (use --model PATH|HF_ID or name it in the launch)")
    expanded = os.path.expanduser(spec)
    # Only a path on disk needs pathlib (the spelling it gives reaches the output): Path drops a trailing "/" or
    # "/.", the one way it finds what the path as written does not.
    if files.exists(expanded) or expanded.endswith(("/", "/.")):
        from pathlib import Path

        path = Path(expanded)
        if files.exists(path) and not files.is_file(path) and not files.is_dir(path):
            files.read_bytes(path, limit=_MAX_CONFIG_BYTES, what="model config")  # raises: a FIFO, a device
        if files.is_file(path):
            config = read_json(path)
            hq = path.with_name("hf_quant_config.json")
            hf_quant = read_json(hq) if files.is_file(hq) and hq != path else None
            desc = _describe(config, path, source=str(path), name=path.parent.name or path.stem, hf_quant=hf_quant)
            return desc._replace(config_path=str(path))
        if files.is_dir(path):
            return _from_dir(path, str(path), path.name)
    cached = _hf_cache_dir(spec)
    if cached is not None:
        return _from_dir(cached, f"HF cache: {spec}", spec)
    cat = _catalog_dir(spec)
    if cat is not None:
        name = os.path.basename(cat).replace("__", "/", 1)
        return _from_dir(cat, f"catalog: {name}", name)
    if spec.startswith(("/", "./", "../", "~")):
        raise InputError(f"model path does not exist: {spec}")
    if allow_hub and "/" in spec and os.environ.get("HF_HUB_OFFLINE", "0") in ("0", "", "false", "False"):
        return _from_hub(spec)
    raise InputError(f"model {spec!r} not found as a path, in the HF cache or in the bundled catalog"
                     f"{_did_you_mean(spec)}")


def close_catalog_ids(spec: str, n: int = 3) -> list[str]:
    """Catalog ids that look like ``spec``. Shared name tokens count most ("3.1", "70b",
    "instruct"), so a size or version match beats a near-identical spelling of another size."""
    import re

    from oomguard.inputs.suggest import clip, ratio as similarity

    def tokens(text: str) -> set[str]:
        return set(re.findall(r"\d+(?:\.\d+)*[a-z]?|[a-z]+", text.lower()))

    spec = clip(spec)  # bounded: difflib is quadratic in the length
    want = tokens(spec)
    want_name = spec.split("/", 1)[-1].lower()
    scored = []
    for cid in catalog_ids():
        have = tokens(cid)
        overlap = len(want & have) / max(1, len(want | have))
        sizes = {t for t in want if re.fullmatch(r"\d+(?:\.\d+)?b", t)}
        size_bonus = 0.3 if sizes and sizes <= have else (-0.3 if sizes else 0.0)
        ratio = similarity(want_name, cid.split("/", 1)[-1].lower())
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

    from pathlib import Path

    try:
        cfg_path = Path(hf_hub_download(model_id, "config.json"))
    except Exception as exc:  # network, auth, 404: all one line for the user
        raise InputError(f"could not fetch config.json of {model_id!r} from the Hub: {exc.__class__.__name__}") from None
    hf_quant = None
    try:
        hf_quant = read_json(Path(hf_hub_download(model_id, "hf_quant_config.json")))
    except Exception:
        pass
    return _describe(read_json(cfg_path), cfg_path, source=f"Hub: {model_id}", name=model_id, hf_quant=hf_quant)
