"""Fix builders for the non-memory classes: illegal memory access, arguments, configuration, Mamba, unknown.

Rejected flags are explained with ``flags.hint_for`` (renames, removals, typos);
configuration errors are mapped to the flag they name where possible.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from oomguard.diagnose.context import Context
from oomguard.diagnose.events import CHOOSE_VALUE, Fix, Signal, Verdict
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.fixes_rank import PADDING
from oomguard.diagnose.flags import hint_for, split_unrecognized
from oomguard.diagnose.parsers.cues import cue_name
from oomguard.diagnose.parsers.numbers import maybe_number
from oomguard.diagnose.remedy import num_of
import oomguard.lazy_re as lazy_re


def _ima(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    v.summary = ("CUDA illegal memory access / device-side assert: a kernel read or wrote out of bounds (a bug or a "
                 "backend/quantization path issue), not an out-of-memory condition.")
    v.fix.append(Fix("CUDA_LAUNCH_BLOCKING", 1, "environment variable: reports the failing kernel at its real call site"))
    v.fix.append(Fix("--enforce-eager", True, "rules CUDA graphs in or out as the trigger"))
    v.fix.append(Fix("VLLM_ATTENTION_BACKEND", "<another backend>", "environment variable: try another attention "
                     "backend (FLASH_ATTN, FLASHINFER, TRITON_ATTN...) or upgrade vLLM"))


def _bad_arg(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    whys = []
    for m in members:
        ev = m.event
        if ev.signal == Signal.UNRECOGNIZED_ARGS and ev.numbers.get("cue"):
            whys.append("argparse printed its usage (the error line after it names the rejected flag)")
        elif ev.signal == Signal.UNRECOGNIZED_ARGS:
            pairs = split_unrecognized(str(ev.numbers.get("args", ""))) or [(str(ev.numbers.get("args", "")), None)]
            if ev.numbers.get("keyword"):
                pairs = [("--" + str(ev.numbers["args"]).replace("_", "-"), None)]
            for flag, given in pairs:
                stray = [t for t in flag.split() if not t.startswith("-")] if not flag.startswith("-") else []
                path = next((t for t in reversed(stray) if "/" in t or "\\" in t), None)
                if path is not None:
                    # A stray positional that names a model: `python -m vllm.entrypoints.openai.api_server` (the
                    # vllm-openai image's entrypoint) takes no positional; `serve MODEL` is the `vllm` CLI's form.
                    if not any(f.flag == "--model" for f in v.fix):
                        v.fix.append(Fix("--model", path, "the API server takes the model as --model; a bare model "
                                         "path is `vllm serve MODEL`'s form (a container whose entrypoint is the "
                                         "API server gets `serve MODEL` as stray arguments)"))
                    whys.append(f"{flag} was given as a positional argument")
                    continue
                hint = hint_for(flag, prog=ev.numbers.get("prog"), version=ctx.version)
                if any(f.flag == (hint.suggestion or hint.flag) for f in v.fix):
                    continue
                value = given if given is not None else ctx.arg(flag.lstrip("-").replace("-", "_"))
                if hint.suggestion:
                    v.fix.append(Fix(hint.suggestion, value if value is not None else True, hint.why))
                else:
                    v.fix.append(Fix(hint.flag, None, hint.why))
                whys.append(f"{flag} was rejected")
        elif ev.signal == Signal.MODEL_NOT_FOUND and ev.numbers.get("gated"):
            if not any(f.flag == "HF_TOKEN" for f in v.fix):
                v.fix.append(Fix("HF_TOKEN", "<a token of an account that accepted the model's licence>",
                                 "environment variable: the repository is gated or private"))
            whys.append("the model repository is gated: no access with the current token")
        elif ev.signal == Signal.MODEL_NOT_FOUND:
            v.fix.append(Fix("--model", "<local directory with config.json, or an existing Hugging Face repo id>",
                             "the model path does not exist or is not a model directory"))
            whys.append("the model path or repository id was not found")
        elif ev.signal == Signal.INVALID_ARG_VALUE:
            problem = str(ev.numbers.get("problem", ev.text))
            arg = ev.numbers.get("arg") or _arg_in(problem)
            whys.append(f"invalid value: {problem[:160]}")
            if arg:
                flag = arg.split("/")[0].strip() if arg.startswith("-") else "--" + arg.replace("_", "-")
                bound = re.search(r"(?:less|greater) than or equal to ([\d.]+)", problem)
                if "max_model_len" in problem and re.search(r"got \w+: 0\b|positive", problem):
                    v.fix.append(Fix(flag, None, "0 no longer means auto: omit it (or pass a positive length)"))
                elif flag == "--gpu-memory-utilization":
                    v.fix.append(Fix(flag, 0.9, "a fraction of the device memory between 0 and 1; 0.9 is the usual default"))
                elif bound and maybe_number(bound.group(1)) is not None:
                    v.fix.append(Fix(flag, maybe_number(bound.group(1)), problem[:200]))
                else:
                    v.fix.append(Fix(flag, "<valid value>", problem[:200]))
    v.summary = "vLLM rejected its command line: " + ("; ".join(dict.fromkeys(whys)) or "invalid argument") + "."


def _arg_in(text: str) -> str | None:
    m = re.search(r"\b(max_model_len|max_num_seqs|max_num_batched_tokens|gpu_memory_utilization|tensor_parallel_size|"
                  r"block_size|kv_cache_dtype|dtype|quantization|swap_space|max_logprobs)\b", text)
    return m.group(1) if m else None


def _max_len(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    asked, derived = num_of(members, "max_model_len"), num_of(members, "derived_max_len")
    source = num_of(members, "derived_from") or "the model config"
    if not derived and ctx.config_max_len:
        asked, derived = asked or ctx.arg("max_model_len"), ctx.config_max_len  # the check made from the config
    v.summary = (f"--max-model-len {asked} is above the model's maximum {derived if derived else ''} "
                 f"(from {source}).").replace("  ", " ")
    if asked and derived:
        v.numbers.append(f"max_model_len {asked} > derived {derived} ({source})")
    v.fix.append(Fix("--max-model-len", derived if derived else "<model maximum>", "the longest context the model "
                     "supports (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 overrides, with RoPE scaling only)"))


_FEATURE_FLAGS = (
    (r"partial prefill", "--max-num-partial-prefills", None),
    (r"prefix caching", "--no-enable-prefix-caching", True),
    (r"chunked prefill", "--no-enable-chunked-prefill", True),
    (r"speculative|spec decode|draft", "--speculative-config", None),
    (r"lora", "--enable-lora", None),
    (r"cascade", "--disable-cascade-attn", True),
    (r"expert parallel", "--enable-expert-parallel", None),
    (r"fp8 kv|kv cache dtype|kv_cache_dtype", "--kv-cache-dtype", "auto"),
)


_MACHINE_FIXES = {
    "Failed to infer device type": Fix("CUDA_VISIBLE_DEVICES", "<the GPU indices>", "environment variable: vLLM saw no "
                                       "GPU (container without --gpus, wrong index, or a CPU-only wheel)"),
    "No CUDA GPUs": Fix("CUDA_VISIBLE_DEVICES", "<the GPU indices>", "environment variable: no GPU is visible"),
    "NVIDIA driver": Fix("docker", "--gpus all (and the NVIDIA container toolkit)", "the container sees no driver"),
    "no kernel image": Fix("pip", "install a vLLM wheel built for this GPU's compute capability (or build from source)",
                           "the installed kernels were not compiled for this GPU"),
    "forked subprocess": Fix("VLLM_WORKER_MULTIPROC_METHOD", "spawn", "environment variable: CUDA was initialised "
                             "before the workers were forked"),
    "shared memory": Fix("--enforce-eager", True, "a Triton kernel asked for more shared memory than this GPU has; "
                         "or try another attention backend (VLLM_ATTENTION_BACKEND)"),
    "driver version is insufficient": Fix("pip", "install a vLLM / torch build for this driver's CUDA version",
                                          "the driver is older than the CUDA runtime of the wheel"),
}


def _config(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    world, gpus = num_of(members, "world_size"), num_of(members, "available_gpus")
    heads, tp = num_of(members, "heads"), num_of(members, "tensor_parallel_size")
    if not (heads and tp) and ctx.config_heads and ctx.tensor_parallel_size > 1 \
            and ctx.config_heads % ctx.tensor_parallel_size:
        heads, tp = ctx.config_heads, ctx.tensor_parallel_size  # the check made from the model's config
    detail = str(num_of(members, "detail") or (members[0].event.text if members else ""))
    if world and gpus:
        v.summary = f"The launch asks for {world} GPUs but only {gpus} are visible."
        v.fix.append(Fix("--tensor-parallel-size", gpus, "at most the number of visible GPUs (check CUDA_VISIBLE_DEVICES)"))
        return
    if heads and tp:
        # GPU counts come in powers of two; the largest one that divides the heads.
        best = max(d for d in (1, 2, 4, 8, 16, 32, 64) if d <= tp and heads % d == 0)
        v.summary = f"The model's {heads} attention heads cannot be split across tensor-parallel size {tp}."
        v.fix.append(Fix("--tensor-parallel-size", best, f"a divisor of {heads}"))
        return
    machine = num_of(members, "machine")
    if machine:
        v.summary = f"This machine cannot run the launch as configured: {detail.strip()[:200]}"
        for key, fix in _MACHINE_FIXES.items():
            if key in machine:
                v.fix.append(fix)
                break
        return
    v.summary = f"vLLM rejected the configuration: {detail.strip()[:200]}"
    low = detail.lower()
    if "block size" in low:
        v.fix.append(Fix("--block-size", None, "let vLLM pick a size every KV group supports (or use the size the model's recipe names)"))
    elif ("bfloat16" in low or "compute capability" in low) and not re.search(DTYPE_MISMATCH, detail, re.IGNORECASE):
        # not torch's "expected scalar type Half but found BFloat16": that names a dtype mismatch, not the GPU
        v.fix.append(Fix("--dtype", "half", "this GPU lacks bfloat16 support"))
    else:
        for pattern, flag, value in _FEATURE_FLAGS:
            if re.search(pattern, low):
                v.fix.append(Fix(flag, value, "the feature is not supported here" if value is None else "disable the unsupported feature"))
                break
        else:
            for flag in ctx.launch_flags:
                words = set(flag.lstrip("-").split("-")) - {"max", "num", "enable", "no", "size"}
                if words and all(w in low for w in words):
                    v.fix.append(Fix(flag, None, "the message names this feature as unsupported"))
                    break


def _mamba(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    seqs, blocks = num_of(members, "max_num_seqs"), num_of(members, "mamba_blocks")
    v.summary = (f"max_num_seqs {seqs} exceeds the {blocks} Mamba state blocks the KV budget leaves: each running "
                 "sequence needs one.")
    v.numbers.append(f"max_num_seqs {seqs} > Mamba blocks {blocks}")
    value = blocks if blocks and blocks < 16 else (blocks - blocks % 8 if blocks else None)
    v.fix.append(Fix("--max-num-seqs", value or "<below the Mamba block count>", "one Mamba state block per running sequence"))
    v.fix.append(Fix("--max-model-len", "<shorter>", "a shorter context leaves more of the pool for state blocks"))


def _unknown(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    # The root error is the first exception of the run; "EngineCore encountered an issue" / EngineDeadError
    # is the API server reporting it afterwards.
    roots = sorted((m for m in members if m.event.signal == Signal.GENERIC_EXCEPTION), key=lambda m: m.event.seq)
    if roots:
        root = roots[0].event
        where = f" in {root.frames[-1]}()" if root.frames else ""
        died = any(m.event.signal == Signal.ENGINE_DIED for m in members) or any(
            s.signal == Signal.ENGINE_DIED and s.run == root.run for s in col.signals)
        v.summary = (f"The engine crashed{' while serving' if root.phase.label == 'serving' else ''}: root error "
                     f"(line {root.line}){where}: {_message_of(root.text)[:200]}"
                     + ("; the 'EngineCore encountered an issue' / EngineDeadError that follows is its consequence"
                        if died else ""))
        v.fix.append(Fix("VLLM_LOGGING_LEVEL", "DEBUG", "environment variable: more context around the root error "
                         "for a bug report (the error is not a memory or flag problem oomguard knows)"))
        return
    text = members[-1].event.text if members else ""
    v.summary = f"The engine failed without a recognised cause; last error: {text.strip()[:200]}"


def _message_of(text: str) -> str:
    """The exception part of a log record ("... [core.py:700] AssertionError: x" -> "AssertionError: x")."""
    m = re.search(r"(?:[\w.]+\.)?\w*(?:Error|Exception)\b.*", text)
    return m.group(0) if m else text.strip()


# torch's dtype mismatch inside the model's forward ("expected scalar type Half but found BFloat16")
DTYPE_MISMATCH = (r"expected (?:scalar type|both tensors to be|mat1 and mat2 to have the same dtype)|"
                  r"(?:Half|BFloat16|Float) but found (?:Half|BFloat16|Float)|must have the same dtype")


# --- standard fixes of the configuration families ---------------------------------------------
# (name, the classes it applies to, a pattern over the verdict's lines, report cues that also count, flag, value, why)
# The value may be a callable of the context. A family fix goes first: it is the thread-tested answer for the
# family, where the class's generic fixes are only the next things to try.
_FAMILIES: tuple[tuple[str, frozenset[str], str, frozenset[str], str, Any, str], ...] = (
    ("bf16", frozenset({"config-error", "unknown", "bad-argument"}),
     r"bfloat16 is only supported|compute capability of at least 8\.0|bf16 is not supported|does not support bfloat16",
     frozenset({cue_name("cfg:bf16+gpu:pre-ampere")}), "--dtype", "half",
     "this GPU has no bfloat16 (compute capability below 8.0: V100, T4, RTX 20xx); half precision runs there"),
    ("custom-allreduce", frozenset({"config-error", "unknown", "nccl-error", "illegal-memory-access"}),
     r"custom[_ ]?all[_ -]?reduce|custom_ar\b|CustomAllreduce", frozenset({cue_name("cfg:custom-allreduce")}),
     "--disable-custom-all-reduce", True,
     "vLLM's custom all-reduce kernel needs P2P / CUDA IPC between the GPUs; NCCL's all-reduce works without it"),
    ("remote-code", frozenset({"config-error", "unknown", "missing-dependency", "bad-argument"}),
     r"trust[_ -]remote[_ -]code", frozenset({cue_name("cfg:remote-code")}), "--trust-remote-code", True,
     "the model's repository ships its own modelling or tokenizer code"),
    # torch's dtype mismatch inside the model's forward ("expected scalar type Half but found BFloat16"): the launch
    # forces a dtype the checkpoint's own layers (or its quantization kernels) were not written for
    ("dtype-mismatch", frozenset({"config-error", "unknown", "bad-argument"}), DTYPE_MISMATCH, frozenset(), "--dtype",
     "auto", "the forced dtype does not match the checkpoint's layers: auto runs them in the dtype they were saved in"),
    # an error raised in a tool-call parser (vllm/entrypoints/openai/tool_parsers/<name>_tool_parser.py, its
    # extract_tool_calls frames, or the argument itself): the parser is chosen per model family
    ("tool-parser", frozenset({"config-error", "unknown", "bad-argument"}),
     r"\w+_tool_parser\.py|tool[_-]call[_-]parser|extract(?:ing)?[_ ]tool[_ ]calls?", frozenset(), "--tool-call-parser",
     CHOOSE_VALUE, "the tool-call parser must be the one of the model's family (vLLM's tool calling docs list them)"),
    ("tokenizer", frozenset({"config-error", "unknown", "chat-template-error"}),
     r"tokenizer[_-]mode|MistralTokenizer|mistral_common|tekken", frozenset(), "--tokenizer-mode", "mistral",
     "Mistral-format checkpoints need Mistral's tokenizer (tekken / mistral_common)"),
    ("hybrid", frozenset({"config-error", "no-kv-memory", "unknown"}),
     r"mamba|hybrid|linear[_ ]attention|state (?:cache )?blocks", frozenset({cue_name("cfg:hybrid")}), "--max-num-seqs",
     lambda ctx: lower_seqs_for(ctx),
     "a hybrid (Mamba / linear-attention) model needs one state block per running sequence"),
    ("swap-space", frozenset({"config-error", "host-oom"}),
     r"Too large swap space|swap space .{0,40}total CPU memory", frozenset(), "--swap-space",
     lambda ctx: 1, "vLLM (V0) refuses a CPU swap space near the host's RAM (it pins that much per GPU)"),
    ("data-parallel", frozenset({"config-error"}),
     r"data parallel(?: mode)? is not supported|Offline data parallel", frozenset(), "--tensor-parallel-size",
     lambda ctx: max(2, int(ctx.arg("data_parallel_size") or 2)),
     "this data-parallel mode is refused for the model: split it with tensor parallelism over the same GPUs"),
    ("long-max-len", frozenset({"illegal-memory-access", "unknown"}),
     r"VLLM_ALLOW_LONG_MAX_MODEL_LEN", frozenset(), "--max-model-len", lambda ctx: ctx.config_max_len or "<model maximum>",
     "VLLM_ALLOW_LONG_MAX_MODEL_LEN lets max_model_len pass the model's positions; requests beyond them index out "
     "of range on the GPU"),
    # vLLM's ModelConfig.verify_with_parallel_config, said in words too ("the number of attention heads is not
    # divisible by 3"): the tensor-parallel size must divide the heads
    ("heads-divisible", frozenset({"config-error"}),
     r"attention heads.{0,80}divis|divis\w* by (?:the )?tensor[_ -]parallel", frozenset(), "--tensor-parallel-size",
     lambda ctx: _heads_divisor(ctx), "the tensor-parallel size must divide the model's attention heads"),
    ("graphs", frozenset({"config-error", "unknown", "illegal-memory-access"}),
     r"cuda ?graph|cudagraph|torch\.compile|inductor|dynamo|torch\._dynamo|piecewise", frozenset(),
     "--enforce-eager", True, "skips torch.compile and CUDA graph capture, where this failure happens"),
)


def _heads_divisor(ctx: Context) -> int | str:
    """The largest power of two at most the current tensor-parallel size that divides the heads (when known)."""
    heads, tp = ctx.config_heads, ctx.tensor_parallel_size
    if heads and tp > 1:
        return max(d for d in (1, 2, 4, 8, 16, 32, 64) if d <= tp and heads % d == 0)
    return "<a divisor of the model's attention heads>"


def lower_seqs_for(ctx: Context) -> int:
    from oomguard.diagnose.remedy import lower_seqs

    return lower_seqs(ctx)


def gpu_without_bf16(ctx: Context, cues: set[str]) -> bool:
    """Whether the GPU has no bfloat16: the GPU table's dtypes for the GPU the log or --gpu names (compute capability
    below 8.0: V100, T4, RTX 20xx), else the report's own words for such a card (the ``gpu:pre-ampere`` cue)."""
    if ctx.gpu_name:
        try:
            from oomguard.inputs.hardware import lookup_gpu

            gpu = lookup_gpu(ctx.gpu_name)
        except Exception:  # noqa: BLE001 - a name the table does not know (or an ambiguous one): the words decide
            gpu = None
        if gpu is not None and gpu.platform == "cuda":
            return "bfloat16" not in gpu.dtypes
    return _PRE_AMPERE in cues


_PRE_AMPERE, _BF16_CUE = cue_name("gpu:pre-ampere"), cue_name("cfg:bf16")
_FP32 = ("float", "float32")
_BF16 = ("bfloat16", "bf16")
# The launch's own dtype, against the GPU: fp32 weights take twice the bytes of the checkpoint's 16-bit ones (every
# memory class, and a report cut before its error); bfloat16 on a card without it is refused at start-up.
_DTYPE_CLASSES = frozenset({"config-error", "unknown", "weights-oom", "profile-oom", "runtime-oom", "cudagraph-oom",
                            "no-kv-memory", "kv-too-small", "startup-free-memory"})


def _dtype_fixes(v: Verdict, ctx: Context, cues: set[str]) -> list[Fix]:
    dtype = str(ctx.arg("dtype") or "").lower().removeprefix("torch.")
    if v.cls.value not in _DTYPE_CLASSES or not dtype:
        return []
    no_bf16 = gpu_without_bf16(ctx, cues)
    if dtype in _FP32:
        return [Fix("--dtype", "half" if no_bf16 else "auto", "the launch runs the weights in fp32: twice the bytes of "
                    "their 16-bit checkpoint" + (" (half: this GPU has no bfloat16)" if no_bf16 else ""))]
    if dtype in _BF16 and no_bf16 and v.cls.value in ("config-error", "unknown"):
        return [Fix("--dtype", "half", "the launch asks for bfloat16, which this GPU does not have (compute "
                    "capability below 8.0); half precision runs there")]
    return []


def family_fixes(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> list[Fix]:
    """The standard fix of every configuration family the verdict's lines (or the report's cues) name."""
    text = " ".join([e.text for e in v.evidence] + [m.event.text for m in members] +
                    [str(m.event.numbers.get("detail", "")) for m in members] +
                    # the functions of the paste's tracebacks (transformers' resolve_trust_remote_code ...)
                    [f for frames in col.paste_frames.values() for f in frames] +
                    [hit.text for hit in col.cues.values() if hit.feature.startswith(("fail:", "words:"))])
    cues = set(col.cues)
    if _BF16_CUE in cues and gpu_without_bf16(ctx, cues):
        cues.add(_PRE_AMPERE)  # the GPU table says so where the report's words do not
    combos = {f"{a}+{b}" for a in cues for b in cues if a != b}
    out = _dtype_fixes(v, ctx, cues)
    for _name, classes, pattern, cue_names, flag, value, why in _FAMILIES:
        if v.cls.value not in classes:
            continue
        if (re.search(pattern, text, re.IGNORECASE) or cue_names & (cues | combos)) and flag not in {f.flag for f in out}:
            out.append(Fix(flag, value(ctx) if callable(value) else value, why))
    return out


# A setting as people write it in a report: --flag, snake_case (an engine argument) or a hyphenated keyword
# ('limit-mm-per-prompt'); only names vLLM has as flags count (_is_vllm_flag), so ordinary words fall away.
_REPORTED = lazy_re.compile(r"(?<![\w-])(?:--)?([a-z][a-z0-9]*(?:[-_][a-z0-9]+){1,5})\b")


def reported_settings(v: Verdict, members: list[Any], col: Collector, limit: int = 2) -> list[Fix]:
    """The vLLM settings the report's recognised lines name (the verdict's error lines, then every cue's and signal's
    line in order), for a verdict whose class proposes fewer than two fixes: the value is left to the reader."""
    texts = [(m.event.file, m.event.line, m.event.text) for m in members]
    texts += [(e.file, e.line, e.text) for e in v.evidence]
    texts += sorted((h.file, h.line, h.text) for h in col.cues.values())
    texts += [(ev.file, ev.line, ev.text) for ev in col.signals]
    out: list[Fix] = []
    seen: set[str] = set()
    for file, line, text in texts:
        for m in _REPORTED.finditer(text or ""):
            flag = "--" + m.group(1).replace("_", "-")
            if flag in seen or flag in _NOT_A_FIX:
                continue
            seen.add(flag)
            if _is_vllm_flag(flag):
                fix = Fix(flag, CHOOSE_VALUE, "the report names this setting")
                fix.chosen = f"the report names this setting ({file}:{line}); {PADDING}"
                out.append(fix)
                if len(out) >= limit:
                    return out
    return out


def launch_levers(ctx: Context, limit: int = 3) -> list[Fix]:
    """The vLLM flags the launch itself sets (a flag the user set is the likely lever), for a verdict that has no fix
    of its own: the value is left to the reader (``CHOOSE_VALUE``)."""
    out: list[Fix] = []
    for flag in ctx.launch_flags:
        flag = "--" + flag.lstrip("-").replace("_", "-")
        if flag in _NOT_A_FIX or flag in {f.flag for f in out} or not _is_vllm_flag(flag):
            continue
        out.append(Fix(flag, CHOOSE_VALUE, "the launch sets this flag and no fix of the class applies: the setting "
                       "the user chose is the likely lever"))
        if len(out) >= limit:
            break
    return out


# --- the setting the message names --------------------------------------------------------------
# vLLM's errors name the setting at fault, as a flag ("--limit-mm-per-prompt") or a config field
# ("max_lora_rank", "swap_space"): a configuration error's fix is that setting, with its value left to the
# reader when the message gives none. Settings that never fix anything (addresses, names) are left out.
_MENTION = lazy_re.compile(r"(?<![\w-])--([a-z][a-z0-9-]{2,50})|\b([a-z][a-z0-9]*(?:_[a-z0-9]+){1,5})\b")
_NOT_A_FIX = {"--model", "--host", "--port", "--served-model-name", "--api-key", "--tokenizer", "--revision",
              "--download-dir", "--seed", "--help", "--config", "--device", "--load-format", "--trust-remote-code"}
NAMED_SETTING_CLASSES = frozenset({"config-error", "unknown", "max-len-exceeds-model", "bad-argument", "host-oom",
                                   "startup-free-memory"})


@lru_cache(maxsize=2048)
def _is_vllm_flag(flag: str) -> bool:
    from oomguard.diagnose.flags import versions_with_flag

    try:
        from oomguard.versions import get_release

        if get_release(None).has_option(flag):
            return True
    except Exception:  # noqa: BLE001 - no table: fall back to the history
        pass
    return versions_with_flag(flag) is not None


def named_setting_fixes(v: Verdict, members: list[Any], col: Collector) -> list[Fix]:
    """A fix for every vLLM setting the verdict's error lines (or the report's failure words) name, in order."""
    texts = [m.event.text for m in members] + [e.text for e in v.evidence]
    texts += [hit.text for hit in col.cues.values() if hit.feature.startswith(("fail:", "words:limit", "words:not"))]
    out: list[Fix] = []
    seen: set[str] = set()
    for text in texts:
        for m in _MENTION.finditer(text):
            flag = "--" + (m.group(1) or m.group(2)).replace("_", "-")
            if flag in seen or flag in _NOT_A_FIX:
                continue
            seen.add(flag)
            if _is_vllm_flag(flag):
                out.append(Fix(flag, CHOOSE_VALUE, "the error names this setting"))
            if len(out) >= 3:
                return out
    return out
