"""What the planner writes must pass `oomguard check`: fit's hardware answers, fit's split of one GPU set,
and a launch fit chose under a calibration profile, each written to a script and checked through the real CLI."""

from __future__ import annotations

import json

from tests.conftest import ROOT, run_cli

PRICES = """\
currency: USD
rows:
  - {gpu: L40S, usd_per_gpu_hour: 1.0, date: 2026-12-01, source: internal rate}
  - {gpu: H100, usd_per_gpu_hour: 3.0, date: 2026-12-01, source: internal rate}
  - {gpu: RTX-4090, usd_per_gpu_hour: 0.5, date: 2026-12-01, source: internal rate}
"""


def _check(tmp_path, name: str, command: str, *args: str):
    f = tmp_path / name
    f.write_text(command + "\n")
    out = run_cli("check", str(f), *args, "--format", "json", timeout=120)
    return out, (json.loads(out.stdout) if out.stdout.strip() else None)


def test_fit_hardware_answers_pass_check_on_the_card_they_name(tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES)
    out = run_cli("fit", "--model", "Qwen/Qwen3-8B", "--context", "32768", "--concurrency", "8", "--prices", str(prices),
                  "--format", "json", timeout=300)
    assert out.returncode == 0, out.stderr
    h = json.loads(out.stdout)["hardware"]
    picks = {h[k] for k in ("cheapest", "best_tokens_per_dollar", "best_latency")}
    for i in sorted(picks):
        c = h["candidates"][i]
        chk, d = _check(tmp_path, f"pick{i}.sh", c["command"], "--gpu", c["gpu"]["type"], "--num-gpus", str(c["gpu"]["count"]))
        assert chk.returncode == 0, (c["command"], chk.stdout[-2000:], chk.stderr)
        assert d["starts"], c["command"]
        # the same pool as fit's plan: one launch, one answer
        assert d["plan"]["kv_cache_tokens"] == c["plan"]["kv_cache_tokens"]


def test_fit_split_of_one_gpu_passes_check_as_two_launches_in_start_order(tmp_path):
    out = run_cli("fit", "--model", "Qwen/Qwen3-8B", "--context", "32768", "--same-gpu", "Qwen/Qwen3-0.6B@8192",
                  "--gpu", "H100", "--format", "json", timeout=300)
    assert out.returncode == 0, out.stderr
    sp = json.loads(out.stdout)["shared_gpu"]
    for kind in ("pinned", "utilization"):
        opt = next(o for o in sp["options"] if o["kind"] == kind)
        assert opt["ok"], kind
        files = []
        for s, length in zip(opt["servers"], (32768, 8192)):
            edits = s["edits"]
            cmd = f"vllm serve {s['plan']['model']} --max-model-len {length} --gpu-memory-utilization {edits['gpu_memory_utilization']}"
            if edits.get("kv_cache_memory_bytes"):
                cmd += f" --kv-cache-memory-bytes {edits['kv_cache_memory_bytes']}"
            f = tmp_path / f"{kind}-{len(files)}.sh"
            f.write_text(cmd + "\n")
            files.append(str(f))
        chk = run_cli("check", files[0], "--same-gpu", files[1], "--gpu", "H100", "--format", "json", timeout=120)
        assert chk.returncode == 0, (kind, chk.stdout[-2000:])
        assert json.loads(chk.stdout)["shared_gpu"][0]["ok"], kind


def test_a_launch_fit_chose_under_a_calibration_passes_check_under_it(tmp_path):
    prof = tmp_path / "fleet.yaml"
    fixtures = ROOT / "tests" / "fixtures" / "calibrate"
    out = run_cli("calibrate", str(fixtures / "h100-loki.jsonl"), "--gpu", "H100",
                  "--model-dir", str(ROOT / "tests" / "data" / "calibration" / "configs"), "--write", str(prof))
    assert out.returncode == 0, out.stderr
    fit = run_cli("fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--vllm-version", "0.11.0",
                  "--context", "16000", "--concurrency", "16", "--calibration", str(prof), "--format", "json", timeout=300)
    assert fit.returncode == 0, fit.stderr
    best = json.loads(fit.stdout)["candidates"][0]
    chk, d = _check(tmp_path, "calibrated.sh", best["command"], "--gpu", "H100", "--vllm-version", "0.11.0",
                    "--calibration", str(prof))
    assert chk.returncode == 0, chk.stdout[-2000:]
    assert d["starts"] and d["plan"]["kv_cache_tokens"] == best["plan"]["kv_cache_tokens"]
    assert any(t.get("calibrated") for t in d["plan"]["per_gpu"]["terms"])
