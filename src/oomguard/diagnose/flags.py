"""Why vLLM rejected a flag, and the spelling it wants instead.

A small table of well-known renames and removals (from the per-wheel flag
presence table of the vLLM reference, §3.3), plus typo checks: a single
leading hyphen, a near miss of a known flag, a sampling parameter passed to
the server, an OpenAI-server flag passed to the demo ``api_server``.

When the generated per-version tables (``oomguard.versions``) are installed,
they are preferred: their hand-written rename notes, ``option_history`` (which
releases accept a flag) and the closest option of the running release. This
module's own table is the fallback when they are not.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class FlagChange:
    flag: str
    change: str  # "removed", "renamed", "abbreviation", "deprecated"
    version: str | None  # first version without the flag (or where it changed)
    replacement: tuple[str, ...]
    note: str


CHANGES: dict[str, FlagChange] = {c.flag: c for c in (
    FlagChange("--swap-space", "removed", "0.18", (),
               "CPU swap space for preempted V0 sequences; V1 recomputes instead. Drop it "
               "(to spill KV to host RAM use --kv-offloading-size, 0.14+)"),
    FlagChange("--use-v2-block-manager", "removed", "0.10", (), "a no-op since 0.6; drop it"),
    FlagChange("--num-scheduler-steps", "removed", "0.10", (), "V0 multi-step scheduling; drop it"),
    FlagChange("--preemption-mode", "removed", "0.11", (), "V0 only; drop it"),
    FlagChange("--max-seq-len-to-capture", "renamed", "0.11", ("--max-cudagraph-capture-size",),
               "the CUDA-graph length cap is now --max-cudagraph-capture-size (or --enforce-eager)"),
    FlagChange("--num-lookahead-slots", "removed", "0.15", (), "speculative decoding sets it; drop it"),
    FlagChange("--cuda-graph-sizes", "renamed", "0.13", ("--cudagraph-capture-sizes", "--max-cudagraph-capture-size"),
               "deprecated in 0.12, removed in 0.13: list sizes with --cudagraph-capture-sizes or cap them "
               "with --max-cudagraph-capture-size"),
    FlagChange("--kv-cache-memory", "abbreviation", None, ("--kv-cache-memory-bytes",),
               "works only as an argparse abbreviation of --kv-cache-memory-bytes (0.10.2+); spell it out"),
    FlagChange("--disable-log-requests", "renamed", "0.11", ("--no-enable-log-requests",),
               "request logging is off by default; the switch is now --enable-log-requests / --no-enable-log-requests"),
    FlagChange("--calculate-kv-scales", "removed", "0.28", (), "present up to 0.25, absent by 0.30; drop it"),
    FlagChange("--max-num-partial-prefills", "removed", "0.28", (), "present up to 0.25, absent by 0.30; drop it"),
    FlagChange("--mamba-cache-mode", "deprecated", "0.33", (), "a deprecated no-op in 0.33"),
    FlagChange("--disable-cascade-attn", "deprecated", "0.33", (), "a deprecated no-op in 0.33"),
    FlagChange("--task", "renamed", None, ("--runner", "--convert"), "replaced by --runner / --convert"),
    FlagChange("--model", "deprecated", "0.13", (), "with `vllm serve` give the model as the positional argument"),
)}

# Per-request sampling parameters that people pass to the server.
SAMPLING = {"--temperature", "--top-p", "--top-k", "--min-p", "--max-tokens", "--presence-penalty",
            "--frequency-penalty", "--repetition-penalty", "--stop", "--n", "--best-of"}

# Flags of the OpenAI-compatible server that the demo vllm.entrypoints.api_server lacks.
OPENAI_SERVER_ONLY = {"--api-key", "--served-model-name", "--chat-template", "--lora-modules", "--response-role",
                      "--enable-auto-tool-choice", "--tool-call-parser", "--reasoning-parser", "--middleware",
                      "--return-tokens-as-token-ids", "--uvicorn-log-level", "--allowed-origins"}

# Common memory-relevant and serving flags of recent releases, for "did you mean".
KNOWN_FLAGS = (
    "--model", "--tokenizer", "--revision", "--dtype", "--quantization", "--max-model-len", "--gpu-memory-utilization",
    "--kv-cache-memory-bytes", "--kv-cache-dtype", "--block-size", "--max-num-seqs", "--max-num-batched-tokens",
    "--enable-chunked-prefill", "--enable-prefix-caching", "--no-enable-prefix-caching", "--enforce-eager",
    "--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size", "--enable-expert-parallel",
    "--cpu-offload-gb", "--kv-offloading-size", "--max-cudagraph-capture-size", "--cudagraph-capture-sizes",
    "--limit-mm-per-prompt", "--mm-processor-kwargs", "--served-model-name", "--host", "--port", "--api-key",
    "--trust-remote-code", "--seed", "--swap-space", "--load-format", "--download-dir", "--max-logprobs",
    "--speculative-config", "--num-gpu-blocks-override", "--language-model-only", "--reasoning-parser",
    "--tool-call-parser", "--enable-auto-tool-choice", "--chat-template", "--generation-config",
    "--override-generation-config", "--distributed-executor-backend", "--disable-custom-all-reduce",
    "--compilation-config", "--hf-overrides", "--enable-lora", "--max-lora-rank", "--max-loras",
)


@dataclass(frozen=True)
class FlagHint:
    flag: str
    suggestion: str | None  # the flag to use instead; None = remove
    why: str


def _normalise(flag: str) -> str:
    name = flag.split("=", 1)[0]
    return "--" + name.lstrip("-").replace("_", "-")


def hint_for(flag: str, *, prog: str | None = None, version: str | None = None) -> FlagHint:
    """Explain one rejected flag as spelled by the user."""
    raw = flag.split("=", 1)[0]
    norm = _normalise(raw)
    if raw.startswith("-") and not raw.startswith("--") and len(raw) > 3:
        return FlagHint(raw, norm, f"{raw} has a single leading hyphen; the flag is {norm}")
    if prog and prog.endswith("api_server.py") and norm in OPENAI_SERVER_ONLY:
        return FlagHint(norm, norm, f"{norm} belongs to the OpenAI-compatible server: run `vllm serve` (or "
                        "`python -m vllm.entrypoints.openai.api_server`) instead of vllm.entrypoints.api_server")
    where = versions_with_flag(norm)
    accepted = f"; accepted by vLLM {where}" if where else ""
    recorded = _recorded_change(norm)
    if recorded is not None:
        replacement, description = recorded
        if replacement:
            return FlagHint(norm, replacement, f"{norm}: {description}{accepted}")
        return FlagHint(norm, None, f"{norm}: {description}{accepted}")
    change = CHANGES.get(norm)
    if change is not None:
        since = f" (gone from {change.version})" if change.version else ""
        if change.change == "abbreviation":
            return FlagHint(norm, change.replacement[0], f"{norm} {change.note}")
        if change.replacement:
            return FlagHint(norm, change.replacement[0], f"{norm} was {change.change}{since}: {change.note}{accepted}")
        return FlagHint(norm, None, f"{norm} was {change.change}{since}: {change.note}{accepted}")
    if norm in SAMPLING:
        return FlagHint(norm, None, f"{norm} is a per-request sampling parameter, not a server flag: send it in the "
                        "request, or set a server default with --override-generation-config "
                        f"'{{\"{norm[2:].replace('-', '_')}\": ...}}' (0.8+)")
    close = _suggestion(norm, version) or next(iter(difflib.get_close_matches(norm, KNOWN_FLAGS, n=1, cutoff=0.8)), None)
    if close and close != norm:
        return FlagHint(norm, close, f"{norm} is not a vLLM flag; did you mean {close}?")
    this = f" ({version})" if version else ""
    if where:
        return FlagHint(norm, None, f"{norm} is not accepted by this vLLM{this}; it exists in vLLM {where}")
    return FlagHint(norm, None, f"{norm} is not a flag of this vLLM{this}; check `vllm serve --help` for its spelling")


def split_unrecognized(args_text: str) -> list[tuple[str, str | None]]:
    """'--swap-space 4 --foo=1 --bar' -> [('--swap-space', '4'), ('--foo', '1'), ('--bar', None)]."""
    pairs: list[tuple[str, str | None]] = []
    for tok in re.split(r"\s+", args_text.strip()):
        if not tok:
            continue
        if tok.startswith("-") and not re.match(r"^-\d", tok):
            name, eq, value = tok.partition("=")
            pairs.append((name, value if eq else None))
        elif pairs:
            name, value = pairs[-1]
            pairs[-1] = (name, tok if value is None else f"{value} {tok}")
    return pairs


def _recorded_change(flag: str) -> tuple[str | None, str] | None:
    """(replacement, description) from the version tables' hand-written rename notes, when installed."""
    try:
        from oomguard.versions.renames import rename_for
    except ImportError:
        return None
    change = rename_for(flag)
    if change is None:
        return None
    return (change.new if change.suggest else None), change.describe()


def _suggestion(flag: str, version: str | None) -> str | None:
    """The closest option of the running release, from the generated tables when installed."""
    try:
        from oomguard.versions import get_release
    except ImportError:
        return None
    try:
        get_release(version).resolve_option(flag)
    except Exception as exc:  # noqa: BLE001 - UnknownFlagError carries the suggestion; anything else: none
        return getattr(exc, "suggestion", None)
    return None


def versions_with_flag(flag: str) -> str | None:
    """Which releases accept ``flag`` ("0.6.0-0.17.0"), from the generated tables when installed."""
    try:
        from oomguard.versions import option_history
    except ImportError:
        return None
    try:
        history = option_history(flag)
    except Exception:  # noqa: BLE001 - tables missing or unreadable: say nothing rather than guess
        return None
    if not history.present_in:
        return None
    return history.first if history.first == history.last else f"{history.first}-{history.last}"
