"""``oomguard fit``: search for the best vLLM launch that fits a goal, or the smallest edit of one that does not."""

from __future__ import annotations

import argparse
import json
import sys

from oomguard.cli import common
from oomguard.cli.common import token_count

from oomguard.cli.common import EXIT_BAD_INPUT, EXIT_FINDINGS as EXIT_NONE_FITS, EXIT_INCOMPLETE, EXIT_OK as EXIT_FOUND  # noqa: F401  (one table: cli/common.py)

EXIT_MEANINGS = {EXIT_FOUND: "the first launch shown meets the goal", EXIT_NONE_FITS: "nothing meets the goal (none found, or the shown edits lower it)", EXIT_INCOMPLETE: "the architecture is not modelled"}


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
    g.add_argument("--max-context", action="store_true", help="find the largest max-model-len the KV pool holds (within the model's maximum, or its RoPE recipe's)")
    p.add_argument("--concurrency", type=common.COUNT, metavar="C", help="requests that must fit in the KV cache together")
    p.add_argument("--avg-input-len", metavar="I", help="their average length in tokens (default: the full context)")
    p.add_argument(
        "--objective",
        choices=["max-context", "max-concurrency", "throughput", "latency"],
        help="what to maximise once the constraints hold (default: throughput; max-context with --max-context)",
    )
    p.add_argument("--host-ram-gib", type=common.host_gib_or_auto, metavar="X|auto",
                   help="host RAM available to the server (sizes the CPU KV tier); auto reads /proc/meminfo, as check does")
    p.add_argument("--margin-gib", type=common.GIB_OR_ZERO, default=None, metavar="X",
                   help="GPU memory to keep free at the prefill peak (default: 2%% of the card, at least 0.5 GiB, as check uses)")
    p.add_argument("--margin-share", type=common.number(above=0, maximum=0.5), default=None, metavar="F",
                   help="the headroom floor as a share of the card when --margin-gib is not given (default 0.02)")
    p.add_argument("--peak-limit-gib", type=common.GPU_GIB, metavar="X", help="cap the per-GPU peak, e.g. what nvidia-smi may show")
    p.add_argument("--top", type=common.number(integer=True, minimum=1, maximum=1000), default=5, metavar="K", help="candidates to show (default 5)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    from oomguard.cli.same_gpu import add_same_gpu_option

    h = p.add_argument_group("choose the hardware (no --gpu, --gpu any, or --gpus)")
    h.add_argument("--gpus", metavar="LIST", help="the cards to compare, e.g. H100,L40S,RTX-4090 (default: every card of the price table)")
    h.add_argument("--prices", metavar="FILE.yaml", help="your price table (rows: gpu, usd_per_gpu_hour, date, source; owned hardware at 0)")
    h.add_argument("--max-nodes", type=common.number(integer=True, minimum=1, maximum=64), default=1, metavar="N",
                   help="also try up to N nodes of 8 GPUs (pipeline stages across nodes) when no single node fits")
    h.add_argument("--rope-scaling", metavar="JSON", help="a RoPE scaling every candidate carries (as --hf-overrides), for a "
                   "context beyond the model's own, e.g. '{\"rope_type\":\"yarn\",\"factor\":3.0,\"original_max_position_embeddings\":262144}'")
    h.add_argument("--interconnect-gbps", type=common.number(above=0, maximum=1e5), default=None, metavar="G",
                   help="the network between nodes in Gb/s (default 100), for the speed of pipeline stages across nodes")
    p.add_argument("--same-gpu", action="append", default=[], metavar="LAUNCH|MODEL[@LEN]",
                   help="another server on the same GPU set (a launch file, or a model id with its max-model-len, e.g. "
                        "Qwen/Qwen3-0.6B@8192; repeatable): fit searches the split of the GPUs between them")
    del add_same_gpu_option


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

        from oomguard.errors import OomguardError, UnsupportedModelError

        try:
            ctx = build_context(args, [])
        except UnsupportedModelError as exc:
            raise InputError(f"fit needs the memory plan, and oomguard does not model this architecture: {exc}") from None
        except OomguardError as exc:
            if args.og_model or "model" not in str(exc):
                raise
            # the launch's model is not on this machine: match it by name the way check does, else say what to pass
            from oomguard.check.context import model_by_name
            from oomguard.cli.common import read_target

            launch0 = read_target(args, [])
            found, how = model_by_name(launch0, launch0.model or "")
            if found is None:
                raise InputError(f"{exc}; pass --model PATH/config.json (or an HF id in the local cache or the bundled catalog)") from None
            print(f"note: {launch0.model} is not on this machine: using the config of {found.source}, matched by {how}; pass --model PATH to use another", file=sys.stderr)
            args.og_model = found.config_path or found.name
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
        num = launch.manifest_gpus()  # the GPUs a Deployment / compose service gives it
    if num is None and launch is not None:
        f = launch.flags
        num = int(f.get("tensor_parallel_size") or 1) * int(f.get("pipeline_parallel_size") or 1)
    num = num or 1
    if num < 1:
        raise InputError(f"--num-gpus must be >= 1, got {num}")
    for opt, val in (("--concurrency", args.concurrency), ("--top", args.top)):
        if val is not None and val < 1:
            raise InputError(f"{opt} must be >= 1, got {val}")
    if args.host_ram_gib == "auto":
        from oomguard.host.procfs import read_available_ram

        args.host_ram_gib = read_available_ram()[0] / GiB
    for opt, val in (("--host-ram-gib", args.host_ram_gib), ("--peak-limit-gib", args.peak_limit_gib), ("--other-gpu-use-gib", args.other_gpu_use_gib)):
        if val is not None and val < 0:
            raise InputError(f"{opt} must not be negative, got {val}")
    if args.margin_gib is not None and args.margin_gib < 0:
        raise InputError(f"--margin-gib must not be negative, got {args.margin_gib}")
    if args.margin_share is not None and not 0 <= args.margin_share < 0.5:
        raise InputError(f"--margin-share must be in [0, 0.5), got {args.margin_share}")
    from oomguard.fit.goalfix import headroom_floor
    from oomguard.fit.space import HEADROOM_FLOOR_SHARE

    # one floor for check and fit: a share of the card, never below 0.5 GiB, unless stated
    margin = int(args.margin_gib * GiB) if args.margin_gib is not None else headroom_floor(gpu.total_bytes, args.margin_share if args.margin_share is not None else HEADROOM_FLOOR_SHARE)
    objective = Objective(args.objective) if args.objective else (Objective.MAX_CONTEXT if args.max_context else Objective.THROUGHPUT)
    goal = Goal(
        context=token_count(args.context, "--context"),
        max_context=bool(args.max_context or objective is Objective.MAX_CONTEXT and not args.context),
        concurrency=args.concurrency,
        avg_input_len=token_count(args.avg_input_len, "--avg-input-len"),
        objective=objective,
        explicit_objective=bool(args.objective),
        margin_bytes=margin,
        peak_limit_bytes=int(args.peak_limit_gib * GiB) if args.peak_limit_gib else None,
        host_ram_bytes=int(args.host_ram_gib * GiB) if args.host_ram_gib else None,
    )
    # the command keeps the model as the launch names it; --model only says where the config is
    name = launch.model if launch is not None and launch.model else spec
    first = None
    fit_only = args.peak_limit_gib or args.margin_gib is not None or args.margin_share is not None or args.host_ram_gib
    if launch is not None and not (args.context or args.max_context or args.objective or fit_only):
        # constraints check does not know (a peak cap, a margin, host RAM) are fit's to rank on
        first = check_first_edit(args, launch, spec)
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
        first_edit=first,
        calibration=common.calibration_of(args),
        fixed_flags=common.rope_scaling_flags(getattr(args, "rope_scaling", None)),
    )


# flags whose change in check's corrected launch is a memory edit fit shows first
_MEMORY_DESTS = (
    "tensor_parallel_size", "pipeline_parallel_size", "kv_cache_dtype", "enforce_eager", "max_num_batched_tokens",
    "max_num_seqs", "gpu_memory_utilization", "max_model_len", "kv_cache_memory_bytes", "enable_chunked_prefill",
    "hf_overrides", "rope_scaling",
)


def check_first_edit(args: argparse.Namespace, launch, model_spec: str | None):
    """The memory edits of ``oomguard check --fix`` on this launch ({dest: value}, {env: value}), so
    that fit --from proposes the same first choice; None when check cannot say (then fit decides)."""
    from oomguard.check.context import CheckOptions
    from oomguard.check.report import check_target, reread
    from oomguard.errors import OomguardError

    opts = CheckOptions(
        version=args.vllm_version,
        model=model_spec if model_spec and model_spec != launch.model else args.og_model,
        gpu=args.gpu,
        gpu_memory_gib=args.gpu_memory_gib,
        num_gpus=args.num_gpus,
        other_gpu_use_gib=args.other_gpu_use_gib or None,
        usage=args.usage,
        concurrency=args.concurrency,
        avg_input_len=token_count(args.avg_input_len, "--avg-input-len"),
        calibration=common.calibration_of(args),
    )
    tail = getattr(args, "launch_tail", None) or []
    try:
        rep = check_target(opts, path=args.launch_file, command=tail or None)
    except OomguardError:
        return None
    if rep.incomplete or rep.fixed_text is None:
        return None
    from oomguard.check.context import json_value

    fixed = reread(rep.ctx.launch, rep.fixed_text, opts.version)
    # JSON-valued flags (--hf-overrides) are read as text from a script; the planner wants the data
    new = {d: json_value(fixed.flags.get(d)) for d in _MEMORY_DESTS}
    old = {d: json_value(launch.flags.get(d)) for d in _MEMORY_DESTS}
    flags = {d: new[d] for d in _MEMORY_DESTS if new[d] != old[d]}
    env = {k: v for k, v in fixed.env.items() if rep.ctx.env.get(k) != v}
    return (flags, env) if flags else None


def hardware_mode(args: argparse.Namespace) -> bool:
    """No GPU named (or ``--gpu any`` / ``--gpus``) for a model goal: choose the hardware."""
    if args.gpus or (args.gpu or "").strip().lower() == "any":
        return True
    return not args.gpu and args.gpu_memory_gib is None and not args.launch_file and not (getattr(args, "launch_tail", None) or [])


def run(args: argparse.Namespace) -> int:
    from oomguard.fit.runner import fit

    from oomguard.redact import Redactor, launch_secrets

    if args.same_gpu:
        from oomguard.cli.same_gpu import fit_split

        return fit_split(args)
    if hardware_mode(args):
        from oomguard.cli.fit_hardware import run_hardware

        return run_hardware(args)
    req = build_request(args)
    result = fit(req)
    # The corrected command repeats the launch's --api-key and JSON-valued flags: secrets are
    # masked at this render edge (the launch file itself is never rewritten by fit).
    launch = req.launch
    redact = Redactor(launch_secrets(launch))
    if args.format == "json":
        json.dump(redact.data(json.loads(json.dumps(result.to_dict(), default=str))), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        import io

        from rich.console import Console

        from oomguard.fit.render import render_fit

        buf = io.StringIO()
        from oomguard.textwidth import output_width

        console = Console(file=buf, highlight=False, force_terminal=sys.stdout.isatty(), width=output_width())
        render_fit(result, console=console)
        sys.stdout.write(redact.text(buf.getvalue()))
    return EXIT_FOUND if result.goal_met else EXIT_NONE_FITS
