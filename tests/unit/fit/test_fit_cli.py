"""``oomguard fit`` on the command line: exit codes, JSON contract, bad input as one line."""

from __future__ import annotations

import json

import pytest

from oomguard.cli.main import main


def _run(capsys, *args):
    rc = main(["fit", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_contract_and_exit_0(capsys):
    rc, out, _ = _run(capsys, "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--context", "32K", "--format", "json", "--top", "2")
    assert rc == 0
    d = json.loads(out)
    assert d["searched"] > 0 and len(d["candidates"]) == 2
    c = d["candidates"][0]
    assert set(("command", "flags", "plan", "tradeoffs")) <= set(c)
    assert c["plan"]["max_model_len"] == 32768 and c["plan"]["starts"] is True
    assert c["command"].startswith("vllm serve Qwen/Qwen3-8B ")


def test_text_output(capsys):
    rc, out, _ = _run(capsys, "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--context", "8192", "--top", "1")
    assert rc == 0
    assert "vllm serve Qwen/Qwen3-8B" in out and "searched" in out and "estimate, roofline" in out


def test_none_fits_exit_1(capsys):
    rc, out, _ = _run(capsys, "--model", "meta-llama/Llama-2-70b-hf", "--gpu", "RTX-3090", "--context", "4096", "--format", "json")
    assert rc == 1
    d = json.loads(out)
    assert d["candidates"] == [] and d["searched"] >= 0


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--model", "Qwen/Qwen3-8B", "--gpu", "B9000"], "unknown GPU"),
        (["--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--context", "lots"], "--context"),
        (["--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--concurrency", "0"], "--concurrency"),
        (["--gpu", "A100-80GB"], "no model"),
        (["--from", "/nonexistent/start_api.sh", "--gpu", "A100-80GB"], "no such file"),
    ],
)
def test_bad_input_exit_2_one_line(capsys, args, needle):
    rc, out, err = _run(capsys, *args)
    assert rc == 2
    assert needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_context_and_max_context_are_exclusive(capsys):
    # argparse's own errors come back as exit status 2 from main(), like every other bad input.
    assert main(["fit", "--model", "Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--context", "8192", "--max-context"]) == 2


def test_from_script(tmp_path, capsys):
    script = tmp_path / "start_api.sh"
    script.write_text("#!/bin/bash\nvllm serve Qwen/Qwen3-8B \\\n  --max-model-len 40960 \\\n  --max-num-batched-tokens 40960 \\\n  --gpu-memory-utilization 0.9\n")
    rc, out, _ = _run(capsys, "--from", str(script), "--gpu", "RTX-4090", "--format", "json")
    assert rc == 0
    d = json.loads(out)
    assert d["launch"]["starts"] is False
    edit = d["candidates"][0]["edit"]
    assert edit and all(e["file"] == str(script) for e in edit if e["line"])
    assert d["candidates"][0]["plan"]["starts"] is True


def test_credentials_of_the_launch_stay_out_of_the_output(tmp_path, capsys):
    script = tmp_path / "start_api.sh"
    script.write_text("export VLLM_API_KEY=sk-env-secret\nvllm serve Qwen/Qwen3-8B --api-key sk-flag-secret --max-model-len 8192\n")
    for fmt in ("json", "text"):
        rc, out, err = _run(capsys, "--from", str(script), "--gpu", "A100-80GB", "--format", fmt, "--top", "2")
        assert rc == 0
        assert "sk-flag-secret" not in out + err and "sk-env-secret" not in out + err


@pytest.mark.parametrize("rope, message", [
    ('{"rope_type":"yarn","factor":1e308,"original_max_position_embeddings":32768}', "implausibly large"),
    ('{"rope_type":"yarn","factor":NaN}', "not a finite number"),
    ('{"rope_type":"yarn","factor":-2}', "not a positive number"),
])
@pytest.mark.parametrize("gpu", [[], ["--gpu", "H100"]])
def test_rope_scaling_is_checked_like_a_config(capsys, rope, message, gpu):
    """fit --rope-scaling with 1e308 or NaN was `internal error: OverflowError/ValueError` (exit 3)
    in the hardware search, and ignored silently with --gpu."""
    rc, out, err = _run(capsys, "--model", "Qwen/Qwen3-8B", *gpu, "--context", "100000", "--rope-scaling", rope)
    assert rc == 2 and message in err and "internal error" not in err


def test_rope_scaling_is_carried_by_every_candidate_with_a_gpu(capsys):
    rope = '{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}'
    rc, out, err = _run(capsys, "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--context", "100000",
                        "--rope-scaling", rope, "--format", "json", "--top", "2")
    assert rc == 0, err
    for c in json.loads(out)["candidates"]:
        assert c["flags"]["hf_overrides"]["rope_scaling"]["factor"] == 4.0  # the user's, not fit's own 3.5
