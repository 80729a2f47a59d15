"""``oomguard fit``: search for the best vLLM launch that fits a goal, or the smallest edit of one that does not."""

from __future__ import annotations

import argparse
import json
import sys

from oomguard.cli import common

EXIT_FOUND, EXIT_NONE_FITS, EXIT_BAD_INPUT = 0, 1, 2


def register(sub, name: str, help_text: str) -> None:
    from oomguard.cli.common import add_target_options

    p = sub.add_parser(
        name,
        help=help_text,
        description="Search the launches vLLM offers (TP/PP split, KV cache dtype, token budget, max-num-seqs, "
        "gpu-memory-utilization, eager vs CUDA graphs, kv-cache-memory-bytes, CPU KV tier, max-model-len) and rank those "
        "that start, hold one max-length request, hold the stated concurrency and keep a prefill peak margin. "
        "With --from, return the smallest edit of an existing launch that makes it fit.",
        epilog="examples:\n"
        "  oomguard fit --model Qwen/Qwen3-8B --gpu A100-80GB --context 131072\n"
        "  oomguard fit --from start_api.sh --gpu A100-80GB\n"
        "  oomguard fit --model meta-llama/Llama-2-13b-chat-hf --gpu RTX-3090 --num-gpus 8 --context 4096 --objective latency\n"
        "  oomguard fit --from start_api.sh --gpu RTX-4090 --num-gpus 4 --host-ram-gib 256 --format json\n"
        "lengths accept vLLM's suffixes: 128K = 131072, 1M = 1048576, 750k = 750000.\n"
        "exit codes: 0 a launch fits, 1 none fits, 2 bad input.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument("--from", dest="launch_file", metavar="LAUNCH", help="start_api.sh or a vLLM --config YAML to edit")
    add_target_options(p, positional=False)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--context", metavar="L", help="max-model-len the launch must serve (default: the launch's, else the model's)")
    g.add_argument("--max-context", action="store_true", help="find the largest max-model-len that fits")
    p.add_argument("--concurrency", type=common.COUNT, metavar="C", help="requests that must fit in the KV cache together")
    p.add_argument("--avg-input-len", metavar="I", help="their average length in tokens (default: the full context)")
    p.add_argument(
        "--objective",
        choices=["max-context", "max-concurrency", "throughput", "latency"],
        help="what to maximise once the constraints hold (default: throughput; max-context with --max-context)",
    )
    p.add_argument("--host-ram-gib", type=common.HOST_GIB, metavar="X", help="host RAM available to the server (sizes the CPU KV tier)")
    p.add_argument("--margin-gib", type=common.GIB_OR_ZERO, default=1.0, metavar="X", help="GPU memory to keep free at the prefill peak (default 1)")
    p.add_argument("--peak-limit-gib", type=common.GPU_GIB, metavar="X", help="cap the per-GPU peak, e.g. what nvidia-smi may show")
    p.add_argument("--top", type=common.number(integer=True, minimum=1, maximum=1000), default=5, metavar="K", help="candidates to show (default 5)")
    p.add_argument("--format", choices=["text", "json"], default="text")


def _length(text: str | None, option: str) -> int | None:
    from oomguard.errors import InputError
    from oomguard.units import parse_size

    if text is None:
        return None
    try:
        n = int(text) if str(text).strip().isdigit() else parse_size(text)
    except ValueError:
        raise InputError(f"{option}: {text!r} is not a token count (e.g. 131072, 128K, 1M, 750k)") from None
    if n <= 0:
        raise InputError(f"{option} must be positive, got {text}")
    return n


def build_request(args: argparse.Namespace):
    """Parse and validate our options into a FitRequest (InputError on bad input)."""
    from oomguard.errors import InputError
    from oomguard.fit.runner import FitRequest
    from oomguard.fit.space import Goal, Objective
    from oomguard.inputs.hardware import lookup_gpu
    from oomguard.inputs.model_config import load_model
    from oomguard.units import GiB

    tail = getattr(args, "launch_tail", None) or []
    launch = None
    version = args.vllm_version
    if args.launch_file or tail:
        # a launch to edit: the shared reader (scripts, --config YAML, a command after --, --engine-python)
        from oomguard.cli.common import build_context

        ctx = build_context(args, [])
        launch, model, gpu, version = ctx.launch, ctx.model, ctx.gpu, ctx.version
        spec = args.og_model or launch.model
    else:
        if getattr(args, "engine_python", None):
            raise InputError("--engine-python needs a launch: --from start_api.sh or a command after --")
        spec = args.og_model
        if not spec:
            raise InputError("no model: pass --model (or a launch with --from)")
        model = load_model(spec)
        gpu = lookup_gpu(args.gpu, args.gpu_memory_gib)
    num = args.num_gpus
    if num is None and launch is not None:
        f = launch.flags
        num = int(f.get("tensor_parallel_size") or 1) * int(f.get("pipeline_parallel_size") or 1)
    num = num or 1
    if num < 1:
        raise InputError(f"--num-gpus must be >= 1, got {num}")
    for opt, val in (("--concurrency", args.concurrency), ("--top", args.top)):
        if val is not None and val < 1:
            raise InputError(f"{opt} must be >= 1, got {val}")
    for opt, val in (("--host-ram-gib", args.host_ram_gib), ("--peak-limit-gib", args.peak_limit_gib), ("--other-gpu-use-gib", args.other_gpu_use_gib)):
        if val is not None and val < 0:
            raise InputError(f"{opt} must not be negative, got {val}")
    if args.margin_gib < 0:
        raise InputError(f"--margin-gib must not be negative, got {args.margin_gib}")
    objective = Objective(args.objective) if args.objective else (Objective.MAX_CONTEXT if args.max_context else Objective.THROUGHPUT)
    goal = Goal(
        context=_length(args.context, "--context"),
        max_context=bool(args.max_context or objective is Objective.MAX_CONTEXT and not args.context),
        concurrency=args.concurrency,
        avg_input_len=_length(args.avg_input_len, "--avg-input-len"),
        objective=objective,
        explicit_objective=bool(args.objective),
        margin_bytes=int(args.margin_gib * GiB),
        peak_limit_bytes=int(args.peak_limit_gib * GiB) if args.peak_limit_gib else None,
        host_ram_bytes=int(args.host_ram_gib * GiB) if args.host_ram_gib else None,
    )
    # the command keeps the model as the launch names it; --model only says where the config is
    name = launch.model if launch is not None and launch.model else spec
    return FitRequest(
        model=model,
        gpu=gpu,
        num_gpus=num,
        goal=goal,
        version=version,
        launch=launch,
        model_name=name,
        other_gpu_use_bytes=int((args.other_gpu_use_gib or 0) * GiB),
        usage=args.usage,
        top=args.top,
    )


def run(args: argparse.Namespace) -> int:
    from oomguard.fit.runner import fit

    req = build_request(args)
    result = fit(req)
    if args.format == "json":
        json.dump(result.to_dict(), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        from oomguard.fit.render import render_fit

        render_fit(result)
    return EXIT_FOUND if result.found else EXIT_NONE_FITS
