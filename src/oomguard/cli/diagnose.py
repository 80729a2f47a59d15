"""``oomguard diagnose``: say which failure a dead vLLM server left behind, why, and what to change.

Exit codes: 0 no failure found (a clean start, or a running server answering requests), 1 at least one failure
verdict, 2 bad input (a missing or unreadable file, or nothing readable at all),
3 could not complete (a vLLM log that stops before the server was ready, with no error).
"""

from __future__ import annotations

import argparse
import sys

from oomguard.cli import common

from oomguard.cli.common import EXIT_BAD_INPUT, EXIT_FINDINGS as EXIT_FAILURE_FOUND, EXIT_INCOMPLETE, EXIT_OK as EXIT_CLEAN  # noqa: F401  (one table: cli/common.py)

EXIT_MEANINGS = {EXIT_CLEAN: "clean", EXIT_FAILURE_FOUND: "a failure was found", EXIT_INCOMPLETE: "the log stops early"}


def add_common_options(p: argparse.ArgumentParser) -> None:
    """Options shared with ``oomguard bundle``."""
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="vLLM logs, dmesg/journalctl -k output, nvidia-smi output, in any order; '-' reads stdin")
    p.add_argument("--launch", metavar="SCRIPT", help="the launch script or command file that started vLLM")
    p.add_argument("--model", help="model id or config directory (enables predicted effects of fixes)")
    p.add_argument("--gpu", help="GPU name, e.g. 'H100 80GB' (enables predicted effects of fixes)")
    p.add_argument("--num-gpus", type=common.GPU_COUNT, metavar="N", help="number of GPUs")
    p.add_argument("--vllm-version", type=common.vllm_version, metavar="X.Y.Z", help="vLLM version, when the log does not print it")
    p.add_argument("--exit-code", type=common.number(integer=True, minimum=-255, maximum=255), metavar="N", help="exit status of the vLLM process, if known (137 = SIGKILL)")


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    p = subparsers.add_parser(
        name, help=help_text, description=help_text + ".",
    )
    add_common_options(p)
    p.add_argument("--format", choices=["text", "json", "markdown"], default="text", help="output format (default text)")
    p.add_argument("--explain", action="store_true", help="show the scored cues behind each verdict (feature, weight, "
                   "file:line) and the next most likely classes (the JSON always has them)")


def run_diagnosis(args: argparse.Namespace):  # -> Diagnosis
    from oomguard.diagnose.diagnosis import diagnose
    from oomguard.diagnose.planning import apply_plan, check_diagnosis, make_plan_callback
    from oomguard.errors import InputError

    from oomguard.cli.common import check_model_option

    check_model_option(args.model)
    files = list(args.files or [])
    launch_text = None
    if args.launch:
        from oomguard.inputs.command import read_text

        launch_text = read_text(args.launch)  # bounded like every launch; - and /dev/fd/N too
    tail = getattr(args, "launch_tail", None)
    if tail:
        import shlex

        launch_text = (launch_text + "\n" if launch_text else "") + shlex.join(tail)
    if not files:
        if sys.stdin is not None and not sys.stdin.isatty():
            files = ["-"]
        else:
            raise InputError("no input files given (pass log files, or '-' to read stdin)")
    diagnosis = diagnose(files, launch_text=launch_text, model=args.model, gpu=args.gpu, num_gpus=args.num_gpus,
                         vllm_version=args.vllm_version, exit_code=args.exit_code)
    # Predicted effects need the arguments that actually ran, known only after reading the logs.
    if check_diagnosis(diagnosis, model=args.model, gpu=args.gpu, num_gpus=args.num_gpus):
        return diagnosis
    plan = make_plan_callback(model=args.model, gpu=args.gpu, num_gpus=args.num_gpus,
                              args=dict(diagnosis.context.args), vllm_version=diagnosis.context.version)
    apply_plan(diagnosis.verdicts, plan)
    return diagnosis


def run(args: argparse.Namespace) -> int:
    from oomguard.diagnose import render

    diagnosis = run_diagnosis(args)
    out = sys.stdout
    explain = bool(getattr(args, "explain", False))
    if args.format == "json":
        render.render_json(diagnosis, out)
    elif args.format == "markdown":
        render.render_markdown(diagnosis, out, explain=explain)
    else:
        render.render_text(diagnosis, out, explain=explain)
    if not diagnosis.readable:
        print("oomguard diagnose: error: no input could be read (see the notes above)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if diagnosis.failed:
        return EXIT_FAILURE_FOUND
    return EXIT_CLEAN if diagnosis.complete else EXIT_INCOMPLETE
