"""Client overhead: oomguard probe's load stage vs vLLM's own ``vllm bench serve``.

Both clients drive the same real vLLM CPU server with the same workload:
``--requests`` prompts of ``--input-len`` random tokens, ``--output-len``
generated tokens each (ignore_eos), at most ``--concurrency`` in flight.
For each client we report request throughput and client CPU seconds per
request (user + system of the client process, from ``os.wait4``).

Start-up cost (vLLM's CLI imports torch: ~10 s of CPU) would swamp the
per-request figure, so each client runs twice, with N1 and N2 requests, and
the CPU per request is the marginal (cpu(N2) - cpu(N1)) / (N2 - N1). The
oomguard side runs the real stage-2 code (``runner.run_stage``) with its
sampling loop on (``/metrics``, server RSS, kernel log every second), so the
figure includes what sampling costs.

    python benchmarks/probe_client_overhead.py                      # builds the tiny model, starts a server
    python benchmarks/probe_client_overhead.py --base-url http://127.0.0.1:8000 --tokenizer /path/to/model

Needs the vLLM CPU venv (scripts/setup_vllm_cpu.sh; env OOMGUARD_VLLM_VENV to override).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))


# -- the oomguard side, run in a child process ------------------------------------


async def _drive(base_url: str, model: str, input_len: int, output_len: int, concurrency: int, requests: int) -> dict:
    from oomguard.probe.client import ProbeClient, Timeouts, normalize_base_url
    from oomguard.probe.kernel import KernelOomSampler
    from oomguard.probe.metrics import MetricsSampler
    from oomguard.probe.prompts import make_builder
    from oomguard.probe.runner import ProbeConfig, Progress, run_stage
    from oomguard.probe.samplers import ProcessTree, RssSampler, find_server_pid
    from oomguard.probe.sampling import SamplingLoop
    from oomguard.probe.schedule import Bounds, Stage, StageKind

    url = normalize_base_url(base_url)
    config = ProbeConfig(url=url, bounds=Bounds(duration_s=3600, request_timeout_s=3600))
    client = ProbeClient(url, timeouts=Timeouts(read=300), max_connections=concurrency + 2)
    builder = await make_builder(client, model, True)
    samplers: list = [MetricsSampler(ProbeClient(url, max_connections=1))]
    pid = find_server_pid(url.port)
    if pid:
        samplers.append(RssSampler(ProcessTree(pid)))
    kernel, _ = KernelOomSampler.create()
    if kernel:
        samplers.append(kernel)
    zero = time.perf_counter()
    in_flight = [0]
    loop = SamplingLoop(samplers, 1.0, zero, in_flight=lambda: in_flight[0])
    loop.start()
    stage = Stage("bench", StageKind.CONCURRENCY, input_len, output_len, concurrency, requests)
    result = await run_stage(stage, client, builder, model, zero, zero + 3600, config, in_flight, Progress())
    await loop.stop()
    await client.aclose()
    d = result.to_json()
    return {
        "ok": d["requests_ok"],
        "failed": d["requests_failed"],
        "wall_s": result.t_end - result.t_start,
        "req_per_s": d["requests_per_s"],
        "prompt_tokens_server": d["prompt_tokens_observed"],
        "samples": len(loop.samples),
        "prompts": builder.describe(),
    }


def _child_cpu(argv: list[str], env: dict | None = None) -> tuple[float, int, str]:
    """Run argv; return (user+system CPU seconds of the child, exit status, stdout)."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return usage.ru_utime + usage.ru_stime, proc.returncode, out.read()


def run_oomguard(a: argparse.Namespace, n: int) -> dict:
    argv = [
        sys.executable, __file__, "--_drive", a.base_url, "--model", a.model, "--input-len", str(a.input_len),
        "--output-len", str(a.output_len), "--concurrency", str(a.concurrency), "--requests", str(n),
    ]
    cpu, rc, out = _child_cpu(argv)
    if rc != 0:
        raise SystemExit(f"oomguard driver failed:\n{out[-3000:]}")
    d = json.loads(out.strip().splitlines()[-1])
    d["cpu_s"] = cpu
    return d


def run_vllm_bench(a: argparse.Namespace, n: int, venv: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        argv = [
            str(venv / "bin" / "vllm"), "bench", "serve", "--backend", "vllm", "--base-url", a.base_url,
            "--endpoint", "/v1/completions", "--model", a.model, "--tokenizer", a.tokenizer,
            "--dataset-name", "random", "--random-input-len", str(a.input_len), "--random-output-len", str(a.output_len),
            "--random-range-ratio", "0", "--num-prompts", str(n), "--max-concurrency", str(a.concurrency),
            "--request-rate", "inf", "--ignore-eos", "--disable-tqdm", "--seed", str(int(time.time()) % 100000),
            "--save-result", "--result-dir", tmp, "--result-filename", "r.json",
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
        cpu, rc, out = _child_cpu(argv, env)
        path = Path(tmp) / "r.json"
        if rc != 0 or not path.exists():
            raise SystemExit(f"vllm bench serve failed (rc {rc}):\n{out[-3000:]}")
        r = json.loads(path.read_text())
    return {
        "ok": r.get("completed"),
        "failed": n - int(r.get("completed") or 0),
        "wall_s": r.get("duration"),
        "req_per_s": r.get("request_throughput"),
        "prompt_tokens_server": (r.get("total_input_tokens") or 0) // max(1, r.get("completed") or 1),
        "cpu_s": cpu,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", help="a running vLLM server (default: start one on the tiny model)")
    ap.add_argument("--model", default="tiny", help="served model name")
    ap.add_argument("--tokenizer", help="model/tokenizer dir for vllm bench (default: the tiny model)")
    ap.add_argument("--input-len", type=int, default=256)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--requests", default="32,160", help="N1,N2 for the marginal CPU per request")
    ap.add_argument("--_drive", dest="drive", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.drive:  # child mode: run oomguard's load stage and print one JSON line
        n = int(a.requests)
        print(json.dumps(asyncio.run(_drive(a.drive, a.model, a.input_len, a.output_len, a.concurrency, n))))
        return 0

    import vllm_server as vs

    problem = vs.vllm_venv_problem()
    if problem:
        print(f"vLLM CPU venv unavailable: {problem}", file=sys.stderr)
        return 2
    n1, n2 = (int(x) for x in a.requests.split(","))
    server = None
    tmp = tempfile.TemporaryDirectory()
    try:
        if not a.base_url:
            model_dir = vs.build_tiny_model(Path(tmp.name) / "tiny")
            server = vs.start_server(model_dir, Path(tmp.name) / "server.log")
            a.base_url, a.tokenizer = server.base_url, a.tokenizer or str(model_dir)
            print(f"server {server.base_url} up in {server.startup_s:.1f}s (tiny model, vLLM CPU)")
        if not a.tokenizer:
            ap.error("--tokenizer is needed with --base-url (vllm bench tokenizes its random prompts)")
        rows = {}
        for name, fn in (("oomguard probe", lambda n: run_oomguard(a, n)), ("vllm bench serve", lambda n: run_vllm_bench(a, n, vs.venv_dir()))):
            small, large = fn(n1), fn(n2)
            marginal = (large["cpu_s"] - small["cpu_s"]) / (n2 - n1)
            rows[name] = (small, large, marginal)
        print(
            f"\nworkload: {n1} and {n2} requests, input {a.input_len} tokens, output {a.output_len} tokens "
            f"(ignore_eos), concurrency {a.concurrency}, server {a.base_url}"
        )
        head = f"{'client':<18}{'req/s (N2)':>11}{'ok/N2':>9}{'prompt tok':>11}{'CPU s N1':>10}{'CPU s N2':>10}{'CPU ms/req':>12}"
        print(head)
        print("-" * len(head))
        for name, (small, large, marginal) in rows.items():
            print(
                f"{name:<18}{large['req_per_s']:>11.2f}{str(large['ok']) + '/' + str(n2):>9}{large['prompt_tokens_server']!s:>11}"
                f"{small['cpu_s']:>10.2f}{large['cpu_s']:>10.2f}{marginal * 1000:>12.2f}"
            )
        ours, theirs = rows["oomguard probe"][2], rows["vllm bench serve"][2]
        verdict = "meets" if ours <= theirs else "MISSES"
        print(
            f"\nCPU ms/req is marginal: (CPU(N2) - CPU(N1)) / (N2 - N1), start-up excluded. oomguard includes its "
            f"sampling loop. Target (oomguard <= vllm bench per request): {verdict} ({ours * 1000:.2f} vs {theirs * 1000:.2f} ms)."
        )
        print(f"oomguard prompts: {rows['oomguard probe'][1].get('prompts')}")
        return 0
    finally:
        if server is not None:
            server.stop()
        tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
