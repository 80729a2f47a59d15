"""One CLI: the same option names mean the same thing, and the exit codes agree across commands.

0 ok, 1 findings / does not fit / failed, 2 bad input, 3 could not complete.
"""

from __future__ import annotations

import json

import pytest

from oomguard.cli.main import SUBCOMMANDS, build_parser
from tests.conftest import run_cli


def _subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")  # noqa: SLF001
    return action.choices


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_every_command_has_a_format_option(command):
    sub = _subparsers()[command]
    if command == "export":  # export's subcommands carry it
        sub = next(a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction").choices["alerts"]  # noqa: SLF001
    fmt = next((a for a in sub._actions if "--format" in a.option_strings), None)  # noqa: SLF001
    assert fmt is not None, f"{command} has no --format"


def test_plan_json_alias_equals_format_json():
    a = run_cli("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--max-model-len", "8192", "--json")
    b = run_cli("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--max-model-len", "8192", "--format", "json")
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    assert json.loads(a.stdout) == json.loads(b.stdout)


def test_plan_verbose_shows_term_sources():
    args = ("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--max-model-len", "8192")
    terse, verbose = run_cli(*args), run_cli(*args, "--verbose")
    assert verbose.returncode == 0, verbose.stderr
    assert verbose.stdout != terse.stdout  # formulas instead of sources in the "how" column


def test_an_architecture_vllm_refuses_at_the_release_is_could_not_complete_not_bad_input():
    # Llama-3.2-Vision: modelled up to 0.10.2; at the default (newest) release, vLLM's own reason
    out = run_cli("plan", "--model", "meta-llama/Llama-3.2-11B-Vision-Instruct", "--gpu", "H200")
    assert out.returncode == 3
    assert "last served by 0.10.2" in out.stderr and "Traceback" not in out.stderr


def test_unknown_model_is_bad_input():
    out = run_cli("plan", "--model", "./no/such/dir", "--gpu", "H200")
    assert out.returncode == 2
