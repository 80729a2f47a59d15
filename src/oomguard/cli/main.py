"""The ``oomguard`` command: a thin dispatcher over one module per subcommand.

Each subcommand module exposes ``register(subparsers)`` (cheap: argparse only)
and ``run(args) -> int``. Library work is imported inside ``run`` so that
``oomguard --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Exit codes shared by every command: cli/common.py (0 ok, 1 findings / does not fit / failed,
# 2 bad input, 3 could not complete, 141 the output pipe closed).
from oomguard.cli.common import EXIT_BAD_INPUT, EXIT_INCOMPLETE, EXIT_PIPE  # noqa: E402

# name -> (module, one-line help). Order is the order shown in --help.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "plan": ("oomguard.cli.plan", "predict vLLM's start-up memory ledger per GPU"),
    "check": ("oomguard.cli.check", "lint a vLLM launch and print the corrected command"),
    "diagnose": ("oomguard.cli.diagnose", "classify a failure from logs, dmesg and nvidia-smi"),
    "bundle": ("oomguard.cli.bundle", "write a redacted, size-bounded failure report"),
    "probe": ("oomguard.cli.probe", "verify a live OpenAI-compatible server under load"),
    "fit": ("oomguard.cli.fit", "search for the best launch that fits a goal"),
    "calibrate": ("oomguard.cli.calibrate", "measure the plan against your own start-up logs; write offsets"),
    "host": ("oomguard.cli.host", "check host RAM, kernel settings and topology"),
    "watch": ("oomguard.cli.watch", "monitor a live server with alerts"),
    "export": ("oomguard.cli.export", "export alert rules, dashboards and launch units"),
    "models": ("oomguard.cli.models", "list the bundled model catalog (works offline)"),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser; ``only``: register just that subcommand (start-up: importing and
    registering all ten costs more than planning a launch)."""
    from oomguard import __version__

    from oomguard.cli.common import OneLineParser

    parser = OneLineParser(
        prog="oomguard",
        description="Keep vLLM deployments from running out of memory.",
    )
    parser.add_argument("--version", action="version", version=f"oomguard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        if only is not None and name != only:
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:  # a subcommand not built yet
            if exc.name != module_name:
                raise
            continue
        module.register(sub, name, help_text)
        _add_exit_codes(sub.choices.get(name), getattr(module, "EXIT_MEANINGS", None))
    return parser


def _add_exit_codes(p, own) -> None:
    """Every command's --help ends with the one exit-code table (cli/common.py), in its own words."""
    if p is None:
        return
    from oomguard.cli.common import exit_epilog

    text = exit_epilog(own)
    p.epilog = (p.epilog.rstrip() + "\n\n" + text) if p.epilog else text


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        _young_generation()
        _default_sigpipe()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parsed = _parse(argv)
    except SystemExit as exc:  # argparse: --help, --version, or a one-line error (OneLineParser)
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_BAD_INPUT)
        return EXIT_BAD_INPUT if code == 2 else code  # a bad option value is bad input, in every command
    if isinstance(parsed, int):
        return parsed
    module, args = parsed
    return _run(module, args)


def _parse(argv: list[str]):
    """(module, args) for the command line, or an exit status when there is nothing to run."""
    # Everything after a bare "--" is a launch command, not ours to parse.
    tail: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, tail = argv[:i], argv[i + 1 :]
    command = next((a for a in argv if not a.startswith("-")), None)
    if command == "check" and "--hook" in argv:
        # the pre-commit hook: several files, per-path settings (cli/hook.py)
        from oomguard.cli import hook

        rest = argv[argv.index("check") + 1 :]
        rest.remove("--hook")
        args = hook.parse(rest)
        args.launch_tail, args.unknown = tail, []
        return hook, args
    parser = build_parser(only=command if command in SUBCOMMANDS else None)
    module = importlib.import_module(SUBCOMMANDS[command][0]) if command in SUBCOMMANDS else None
    if module is not None and getattr(module, "ACCEPTS_VLLM_FLAGS", False):
        # Our options and vLLM's share the command line: split them ourselves.
        from oomguard.cli.common import split_argv

        rest = argv[argv.index(command) + 1 :]
        sub_parser = module._PARSER  # noqa: SLF001
        if any(a in ("-h", "--help") for a in rest):
            sub_parser.print_help()
            return 0
        ours, theirs = split_argv(sub_parser, rest)
        args = sub_parser.parse_args(ours)
        args.command = command
        unknown = theirs
    else:
        args, unknown = parser.parse_known_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 0
    args.launch_tail = tail
    args.unknown = unknown
    module = importlib.import_module(SUBCOMMANDS[args.command][0])
    if unknown and not getattr(module, "ACCEPTS_VLLM_FLAGS", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return module, args


def _default_sigpipe() -> None:
    """The command line: a reader that closes the pipe early (``oomguard plan ... | head``) ends the
    process quietly with SIGPIPE, which the shell reports as 141 (128 + 13), as ``yes | head`` does:
    never a traceback, and never 1, which would read as "will not start"."""
    try:  # the C module that signal wraps: importing signal builds three IntEnums from every SIG* name (~0.5 ms)
        import _signal as signal
    except ImportError:  # not CPython
        import signal

    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)


# Objects the cyclic collector lets accumulate before it runs (Python's default: 700).
YOUNG_GENERATION = 100_000


def _young_generation() -> None:
    """The command line: a command's start-up makes tens of thousands of objects that live as long as the
    process (classes, functions, tables; ~20,000 for plan --json, ~65,000 for diagnose) and next to no
    garbage cycles, so the 25-100 collections the default threshold runs over them find nothing (~5 % of
    plan's CPU). At 100,000 the young generation is collected as often as a long run (diagnose on a large
    log, watch) makes that many objects: the cycles it frees wait longer, the collector's work is less
    (an object freed by its reference count before a collection is never scanned)."""
    import gc

    gc.set_threshold(YOUNG_GENERATION, *gc.get_threshold()[1:])


def _closed_pipe() -> int:
    """In-process callers (no SIGPIPE default): stop writing, exit as the pipe convention says."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return EXIT_PIPE


def _run(module, args: argparse.Namespace) -> int:
    from oomguard.errors import OomguardError, UnsupportedModelError

    bad_input = EXIT_BAD_INPUT
    try:
        code = int(module.run(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers, not at interpreter exit
        return code
    except UnsupportedModelError as exc:
        # Not bad input: the config is fine, the planner cannot model it yet ("could not complete").
        print(f"oomguard {args.command}: error: {_error_text(exc)}", file=sys.stderr)
        return EXIT_INCOMPLETE
    except OomguardError as exc:
        print(f"oomguard {args.command}: error: {_error_text(exc)}", file=sys.stderr)
        return bad_input
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _closed_pipe()
    # The last line of defence: an input that reached a path with no check of its own still gets
    # one line naming what failed, never a traceback (OOMGUARD_DEBUG=1 shows it).
    except OSError as exc:
        if _debug():
            raise
        from oomguard.inputs.files import input_error

        where = exc.filename if exc.filename is not None else "input"
        print(f"oomguard {args.command}: error: {_one_line(str(input_error(exc, where)))}", file=sys.stderr)
        return bad_input
    except RecursionError:
        if _debug():
            raise
        print(f"oomguard {args.command}: error: an input is nested too deeply to read", file=sys.stderr)
        return bad_input
    except MemoryError:
        print(f"oomguard {args.command}: error: out of memory reading the inputs", file=sys.stderr)
        return bad_input
    except Exception as exc:  # noqa: BLE001
        if _debug():
            raise
        print(f"oomguard {args.command}: internal error: {exc.__class__.__name__} "
              f"(a bug in oomguard; rerun with OOMGUARD_DEBUG=1 for the traceback and report it)", file=sys.stderr)
        return EXIT_INTERNAL


# A bug is still "could not complete": the documented codes are 0-3 for every command.
EXIT_INTERNAL = EXIT_INCOMPLETE


def _debug() -> bool:
    import os

    return os.environ.get("OOMGUARD_DEBUG", "") not in ("", "0")


_MAX_MESSAGE = 1200


def _error_text(exc: Exception) -> str:
    """An error as one safe line: secrets masked, terminal escapes stripped, newlines folded."""
    from oomguard.redact import redact_text, safe_terminal_text

    return _one_line(safe_terminal_text(redact_text(str(exc))))


def _one_line(text: str) -> str:
    # Messages may quote input (a value, a path): a newline in it must not start a second line, and a
    # 5000-character argument must not become a 5000-character message.
    text = " ".join(text.split("\n")) if "\n" in text else text
    if len(text) > _MAX_MESSAGE:
        text = text[: _MAX_MESSAGE - 300] + " … " + text[-297:]
    return text


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
