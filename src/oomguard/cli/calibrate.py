"""``oomguard calibrate``: measure the planner against a fleet's own start-up logs, and write the offsets.

Exit codes: 0 start-ups matched (and the profile written with --write), 1 start-ups found
but none could be matched (each says why), 2 bad input, 3 no vLLM start-up with a ledger
line in the inputs (nothing to measure).
"""

from __future__ import annotations

import argparse
import json
import sys

from oomguard.cli import common
from oomguard.cli.common import EXIT_BAD_INPUT, EXIT_FINDINGS as EXIT_NONE_MATCHED, EXIT_INCOMPLETE as EXIT_NOTHING, EXIT_OK  # noqa: F401  (one table: cli/common.py)

EXIT_MEANINGS = {EXIT_OK: "start-ups matched (and the profile written with --write)",
                 EXIT_NONE_MATCHED: "start-ups found but none could be matched (each says why)",
                 EXIT_NOTHING: "no vLLM start-up with a ledger line in the inputs"}

_EPILOG = """examples:
  oomguard calibrate logs/                                  # every file under logs/ (plain or .gz)
  kubectl logs -l app=vllm --prefix --tail=-1 | oomguard calibrate - --gpu H100
  oomguard calibrate 'runs/**/*.log.gz' --model-dir /data/models=./configs --write fleet.yaml
  oomguard calibrate loki-export.jsonl --message-field line --format json
  oomguard plan start_api.sh --gpu H100 --calibration fleet.yaml    # or OOMGUARD_CALIBRATION=fleet.yaml"""


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(
        name,
        help=help_text,
        description="Read vLLM start-up logs (files, directories, globs, '-' for kubectl/docker/journalctl output, or "
        "JSON-lines exports of Loki, Elasticsearch/OpenSearch, CloudWatch), cut them into start-ups, plan each launch "
        "that ran and compare every term of the ledger with what vLLM logged, per GPU x release x model family. "
        "--write saves the measured offsets for plan/check/fit --calibration.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument("inputs", nargs="+", metavar="LOG", help="log file, directory, glob, or - for stdin")
    p.add_argument("--gpu", metavar="NAME", help="the GPU of start-ups whose log does not name one, e.g. H100")
    p.add_argument("--gpu-memory-gib", type=common.GPU_GIB, metavar="X", help="total GPU memory as torch reports it, where the log does not print it")
    p.add_argument("--model", dest="og_model", metavar="PATH|HF_ID", help="the model of start-ups whose log names none")
    p.add_argument("--model-dir", action="append", default=[], metavar="DIR|OLD=NEW",
                   help="where model configs are: DIR/<name>/config.json, or map the log's path prefix OLD to NEW (repeatable)")
    p.add_argument("--vllm-version", type=common.vllm_version, metavar="V", help="the release of start-ups whose log does not print it")
    p.add_argument("--message-field", metavar="FIELD", help="JSON-lines exports: the field holding the log line (dotted: _source.message)")
    p.add_argument("--write", metavar="PROFILE.yaml", help="write the per-group offsets for plan/check/fit --calibration")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--json", dest="format", action="store_const", const="json", help="same as --format json")


def run(args: argparse.Namespace) -> int:
    from oomguard.calibrate.match import Options
    from oomguard.calibrate.run import calibrate

    if args.gpu:
        from oomguard.inputs.hardware import lookup_gpu

        lookup_gpu(args.gpu)  # an unknown name is bad input now, not 40 unmatched start-ups later
    opts = Options(gpu=args.gpu, gpu_total_gib=args.gpu_memory_gib, model=args.og_model, model_dirs=tuple(args.model_dir), vllm_version=args.vllm_version)
    res = calibrate(list(args.inputs), opts, message_field=args.message_field, write=args.write)
    if args.format == "json":
        from oomguard.redact import redact_data

        json.dump(redact_data(res.to_dict()), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        from rich.console import Console

        from oomguard.calibrate.render import render

        render(res, Console(highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 160))
    if not res.matches:
        print("oomguard calibrate: no vLLM start-up with a ledger line found in the inputs", file=sys.stderr)
        return EXIT_NOTHING
    if not res.matched:
        return EXIT_NONE_MATCHED
    return EXIT_OK
