"""Why vLLM rejected a flag, and the spelling it wants instead.

Renames and removals come from ``oomguard.versions`` (its rename notes,
``option_history`` for which releases accept a flag, and the closest option of
the running release); this module adds typo checks: a single leading hyphen, a
near miss of a known flag, a sampling parameter passed to the server, an
OpenAI-server flag passed to the demo ``api_server``.
"""

from __future__ import annotations

import difflib
import re

from oomguard.records import record


@record(frozen=True)
class FlagChange:
    flag: str
    change: str  # "removed", "renamed", "abbreviation", "deprecated"
    version: str | None  # first version without the flag (or where it changed)
    replacement: tuple[str, ...]
    note: str


# Renames and removals live in oomguard.versions.renames (one table for every command); these
# two are not renames: an argparse abbreviation and a deprecated way to name the model.
CHANGES: dict[str, FlagChange] = {c.flag: c for c in (
    FlagChange("--kv-cache-memory", "abbreviation", None, ("--kv-cache-memory-bytes",),
               "works only as an argparse abbreviation of --kv-cache-memory-bytes (0.10.2+); spell it out"),
    FlagChange("--model", "deprecated", "0.13", (), "with `vllm serve` give the model as the positional argument"),
)}

# Per-request sampling parameters that people pass to the server.
SAMPLING = {"--temperature", "--top-p", "--top-k", "--min-p", "--max-tokens", "--presence-penalty",
            "--frequency-penalty", "--repetition-penalty", "--stop", "--n", "--best-of"}

# Options of other tools (vLLM's benchmark client, SGLang, TGI) and near names that people pass to `vllm serve`:
# the server's own flag for the same thing.
OTHER_TOOLS: dict[str, tuple[str, str]] = {
    "--max-concurrency": ("--max-num-seqs", "--max-concurrency is the benchmark client's option (vllm bench serve); "
                          "the server caps concurrent requests with --max-num-seqs"),
    "--max-batch-size": ("--max-num-seqs", "the server's batch-size cap is --max-num-seqs"),
    "--lora-path": ("--lora-modules", "adapters are given as --lora-modules name=path (with --enable-lora)"),
    "--lora-paths": ("--lora-modules", "adapters are given as --lora-modules name=path (with --enable-lora)"),
    "--context-length": ("--max-model-len", "the context length is --max-model-len"),
    "--max-seq-len": ("--max-model-len", "the context length is --max-model-len"),
    "--max-total-tokens": ("--max-model-len", "TGI's --max-total-tokens is vLLM's --max-model-len"),
    "--mem-fraction-static": ("--gpu-memory-utilization", "SGLang's --mem-fraction-static is vLLM's "
                              "--gpu-memory-utilization"),
    "--tp-size": ("--tensor-parallel-size", "SGLang's --tp-size is vLLM's --tensor-parallel-size"),
    "--num-shard": ("--tensor-parallel-size", "TGI's --num-shard is vLLM's --tensor-parallel-size"),
}

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


@record(frozen=True)
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
    if norm in OTHER_TOOLS:
        flag_, why = OTHER_TOOLS[norm]
        return FlagHint(norm, flag_, why)
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
    """(replacement, description) from the version tables' hand-written rename notes."""
    from oomguard.versions.renames import rename_for

    change = rename_for(flag)
    if change is None:
        return None
    return (change.new if change.suggest else None), change.describe()


def _suggestion(flag: str, version: str | None) -> str | None:
    """The closest option of the running release, from the generated tables."""
    from oomguard.versions import get_release

    try:
        get_release(version).resolve_option(flag)
    except Exception as exc:  # noqa: BLE001 - UnknownFlagError carries the suggestion; anything else: none
        return getattr(exc, "suggestion", None)
    return None


def versions_with_flag(flag: str) -> str | None:
    """Which releases accept ``flag`` ("0.6.0-0.17.0"), from the generated tables."""
    from oomguard.versions import option_history

    try:
        history = option_history(flag)
    except Exception:  # noqa: BLE001 - tables missing or unreadable: say nothing rather than guess
        return None
    if not history.present_in:
        return None
    return history.first if history.first == history.last else f"{history.first}-{history.last}"
