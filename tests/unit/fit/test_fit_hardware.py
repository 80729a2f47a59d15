"""fit without a GPU: card type × count ranked by cost and speed, through the real CLI with a price table."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

PRICES = """\
# an internal rate card
currency: USD
rows:
  - {gpu: L40S, usd_per_gpu_hour: 1.0, date: 2026-12-01, source: internal rate, tier: reserved}
  - {gpu: H100, usd_per_gpu_hour: 3.0, date: 2026-12-01, source: internal rate}
  - {gpu: RTX-4090, usd_per_gpu_hour: 0, source: "owned: the lab's box"}
"""


@pytest.fixture
def prices(tmp_path):
    p = tmp_path / "prices.yaml"
    p.write_text(PRICES)
    return str(p)


def _fit(*args):
    out = run_cli("fit", *args, "--format", "json", timeout=300)
    return out, (json.loads(out.stdout) if out.stdout.strip() else None)


def test_every_candidate_carries_its_gpu_and_cost_and_the_three_answers_point_into_them(prices):
    out, d = _fit("--model", "Qwen/Qwen3-8B", "--context", "32768", "--concurrency", "8", "--prices", prices)
    assert out.returncode == 0, out.stderr
    h = d["hardware"]
    assert h["candidates"], h["searched"]
    rate = {"L40S": 1.0, "H100-SXM-80GB": 3.0, "RTX-4090": 0.0}
    for c in h["candidates"]:
        assert set(c["gpu"]) >= {"type", "count"} and c["gpu"]["type"] in rate
        assert c["cost_per_hour"] == pytest.approx(rate[c["gpu"]["type"]] * c["gpu"]["count"])
        assert c["plan"]["starts"] and c["command"].startswith(("vllm serve", "VLLM_"))
        assert c["plan"]["tensor_parallel_size"] * c["plan"]["pipeline_parallel_size"] <= c["gpu"]["count"]
    cheapest = h["candidates"][h["cheapest"]]
    assert cheapest["gpu"]["type"] == "RTX-4090" and cheapest["tokens_per_dollar"] == "unpriced: owned"
    assert h["candidates"][h["best_latency"]]["latency_s"] == min(c["latency_s"] for c in h["candidates"])
    assert h["prices"].endswith("prices.yaml")
    # the search skips what cannot hold the weights and the goal's KV before searching flags
    assert any("exceed" in s["result"] for s in h["searched"]) or len(h["searched"]) == len(h["candidates"])


def test_gpus_list_and_text_output(prices):
    out = run_cli("fit", "--model", "Qwen/Qwen3-8B", "--context", "32768", "--concurrency", "4", "--gpus", "L40S,H100,A10",
                  "--prices", prices, timeout=300)
    assert out.returncode == 0, out.stderr
    for needle in ("cheapest that fits", "most tokens per dollar", "lowest latency", "vllm serve Qwen/Qwen3-8B", "internal rate"):
        assert needle in out.stdout, needle
    # A10 has no price in this table: ranked on speed only, and the output says so
    assert "unpriced" in out.stdout or "A10" not in out.stdout


def test_gpu_any_is_the_bundled_table():
    out, d = _fit("--model", "Qwen/Qwen3-0.6B", "--context", "8192", "--gpu", "any", "--gpus", "L4,RTX-4090")
    assert out.returncode == 0, out.stderr
    assert "prices.yaml (bundled)" in d["hardware"]["prices"]
    for c in d["hardware"]["candidates"]:
        assert c["price"]["date"] and c["price"]["source"]


def test_more_nodes_with_pipeline_stages_when_one_node_is_not_enough(prices):
    out, d = _fit("--model", "meta-llama/Meta-Llama-3.1-405B", "--context", "4096", "--concurrency", "2", "--gpus", "L40S",
                  "--max-nodes", "4", "--interconnect-gbps", "200", "--prices", prices)
    assert out.returncode == 0, out.stderr
    (c,) = d["hardware"]["candidates"]
    assert c["gpu"]["nodes"] == 4 and c["gpu"]["count"] == 32
    assert c["plan"]["tensor_parallel_size"] <= 8 and c["plan"]["pipeline_parallel_size"] == 4
    assert "200 Gb/s" in c["interconnect"]
    out, d = _fit("--model", "meta-llama/Meta-Llama-3.1-405B", "--context", "4096", "--gpus", "L40S", "--prices", prices)
    assert out.returncode == 1 and d["found"] is False  # one node only: nothing fits


@pytest.mark.parametrize("text, needle", [
    ("rows:\n  - {gpu: H1OO-typo, usd_per_gpu_hour: 1}\n", ":2: rows[0].gpu: unknown GPU"),
    ("rows:\n  - {gpu: H100, usd_per_gpu_hour: -1}\n", ":2: rows[0].usd_per_gpu_hour"),
    ("rows:\n  - {gpu: H100, usd_per_gpu_hour: 1}\n  - {gpu: H100-SXM, usd_per_gpu_hour: 2}\n", ":3: rows[1]: H100-SXM-80GB is priced twice"),
    ("- just a list\n", "a price table is a YAML mapping"),
])
def test_bad_price_table_is_one_line_naming_file_and_line(tmp_path, text, needle):
    p = tmp_path / "p.yaml"
    p.write_text(text)
    out = run_cli("fit", "--model", "Qwen/Qwen3-0.6B", "--context", "8192", "--prices", str(p))
    assert out.returncode == 2, out.stdout
    assert needle in out.stderr and "Traceback" not in out.stderr


def test_fit_from_a_launch_still_needs_its_gpu(tmp_path):
    f = tmp_path / "start.sh"
    f.write_text("vllm serve Qwen/Qwen3-0.6B --max-model-len 8192\n")
    out = run_cli("fit", "--from", str(f), "--gpus", "L40S")
    assert out.returncode == 2 and "--gpu" in out.stderr
