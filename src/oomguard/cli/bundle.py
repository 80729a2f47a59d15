"""``oomguard bundle``: write a redacted, size-bounded failure report; ``--ask`` for a second opinion.

Exit codes: 0 no failure found, 1 failure found (the report is written either
way), 2 bad input, 3 the report was written but ``--ask`` failed.
"""

from __future__ import annotations

import argparse
import sys

from oomguard.cli import common

from oomguard.cli.common import EXIT_BAD_INPUT, EXIT_INCOMPLETE as EXIT_ASK_FAILED  # noqa: F401  (one table: cli/common.py)

EXIT_MEANINGS = {0: "clean", 1: "a failure was found", 3: "the log stops early or the report could not be written whole"}


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    from oomguard.cli.diagnose import add_common_options

    p = subparsers.add_parser(name, help=help_text, description=help_text + ".")
    add_common_options(p)
    p.add_argument("-o", "--output", metavar="REPORT.md", help="where to write the report (default: stdout)")
    p.add_argument("--format", choices=("markdown", "json"), default="markdown",
                   help="the report as Markdown (default), or JSON: the report, its size, the verdict and where it went")
    p.add_argument("--max-bytes", type=common.number(integer=True, minimum=1024, maximum=64 << 20), default=64 * 1024, metavar="N", help="size limit of the report (default 65536)")
    p.add_argument("--ask", action="store_true",
                   help="send the report to an OpenAI-compatible endpoint for a second opinion "
                   "(OOMGUARD_LLM_BASE_URL, OOMGUARD_LLM_API_KEY, OOMGUARD_LLM_MODEL)")


def run(args: argparse.Namespace) -> int:
    from oomguard.cli.diagnose import EXIT_CLEAN, EXIT_FAILURE_FOUND, run_diagnosis
    from oomguard.diagnose.bundle import build_bundle

    diagnosis = run_diagnosis(args)
    text = build_bundle(diagnosis, max_bytes=args.max_bytes)
    verdicts = diagnosis.verdicts
    top = f"{verdicts[0].cls.value} (confidence {verdicts[0].confidence:.2f})" if verdicts else "no failure found"
    to_file = bool(args.output and args.output != "-")
    if to_file:
        from oomguard.inputs.writes import write_text

        write_text(args.output, text, what="the report")
    if args.format == "json":
        import json

        json.dump({
            "verdict": verdicts[0].cls.value if verdicts else None,
            "confidence": round(verdicts[0].confidence, 2) if verdicts else None,
            "bytes": len(text.encode()),
            "written_to": args.output if to_file else None,
            "report": None if to_file else text,
        }, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif to_file:
        print(f"oomguard verdict: {top}; report written to {args.output} ({len(text.encode())} bytes)")
    else:
        sys.stdout.write(text)
    code = EXIT_FAILURE_FOUND if diagnosis.failed else (EXIT_CLEAN if diagnosis.complete else EXIT_ASK_FAILED)
    if not diagnosis.readable:
        code = EXIT_BAD_INPUT
    if args.ask:
        from oomguard.diagnose.ask import AskError, ask

        try:
            answer = ask(text)
        except AskError as exc:
            print(f"oomguard bundle: error: {exc}", file=sys.stderr)
            return EXIT_ASK_FAILED
        import os

        from oomguard.redact import Redactor, safe_terminal_text

        redact = Redactor([os.environ.get("OOMGUARD_LLM_API_KEY") or ""])
        print()
        print(f"----- second opinion from {safe_terminal_text(answer.model)} at {redact(answer.endpoint)} "
              "(not oomguard's verdict) -----")
        # The endpoint's reply is a stranger's text: it can echo a key or carry terminal escapes.
        print(safe_terminal_text(redact(answer.text)))
        print("----- end of second opinion -----")
    return code
