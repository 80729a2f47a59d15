"""Throughput and peak memory of ``oomguard diagnose`` on a large synthetic vLLM log, beside ``grep -E``.

Generates (once, cached) a log of ``--size-mb`` megabytes in /tmp, of one of these kinds (``--log``):

- ``serving``: a V1 start-up, then serving traffic (throughput lines, HTTP access lines, request
  bookkeeping, the odd warning), then a CUDA OOM while serving near the end (expects runtime-oom);
- ``crash-loop``: thousands of repeated start-ups (a supervisor restarting vLLM), each dying of a CUDA
  OOM in the profile run, with their own pids and times (expects profile-oom);
- ``distinct-errors``: a start-up, then error and warning lines that are all different (request ids,
  words, numbers), then a CUDA OOM while serving (expects runtime-oom);
- ``random-text``: random printable text (the "1 GB of random text" bad-input case): no verdict
  expected, only bounded time and memory.

Runs the real CLI as a separate process (``python -m oomguard.cli.main diagnose --format json``), so
the figures include interpreter start-up and imports, and reports per run: MB/s of the whole process
(wall clock and per CPU-second), peak RSS, the top verdict, and the load average at that moment (the
machine is shared: take the best or the median of several runs). With ``--vs-grep`` each run is paired
with two ``grep -E -c`` runs over the same file (``LC_ALL=C``, grep's fastest mode), right after it (the file is
read once before each diagnose run, untimed, so that all three find it in the page cache): one with
the keyword table (``prefilter.KEYWORDS`` / ``CASELESS``, the re2/re engines' search) as one extended regex,
one with a small fixed pattern (``SMALL_PATTERN``). The issue's target is diagnose's MB/s >= grep's.

Usage: .venv/bin/python benchmarks/diagnose_throughput.py [--log serving|crash-loop|distinct-errors|random-text]
       [--size-mb 1024] [--runs 5] [--vs-grep] [--engine hyperscan|re2|re] [--jobs N] [--split-cpu] [--keep]
The generated file is never committed; it is removed unless --keep is given.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchlib import timed_run

MB = 1_000_000
BENCH_DIR = Path("/tmp/oomguard-bench")
ROOT = Path(__file__).resolve().parents[1]
EXPECTED = {"serving": "runtime-oom", "crash-loop": "profile-oom", "distinct-errors": "runtime-oom", "random-text": None}

STARTUP = """\
(APIServer pid=1) INFO 05-01 19:00:01 [api_server.py:1951] vLLM API server version 0.20.0
(APIServer pid=1) INFO 05-01 19:00:01 [utils.py:302] non-default args: {'model_tag': 'Qwen/Qwen3-14B', 'model': 'Qwen/Qwen3-14B', 'max_model_len': 40960, 'max_num_batched_tokens': 16384}
(EngineCore pid=187) INFO 05-01 19:00:20 [core.py:101] Initializing a V1 LLM engine (v0.20.0) with config: model='Qwen/Qwen3-14B', dtype=torch.bfloat16, max_seq_len=40960, tensor_parallel_size=1, enforce_eager=False, kv_cache_dtype=auto, device_config=cuda, seed=0
(EngineCore pid=187) INFO 05-01 19:00:22 [gpu_model_runner.py:4800] Starting to load model Qwen/Qwen3-14B...
(EngineCore pid=187) INFO 05-01 19:01:54 [gpu_model_runner.py:4879] Model loading took 27.52 GiB memory and 90.898504 seconds
(EngineCore pid=187) INFO 05-01 19:03:12 [gpu_worker.py:440] Available KV cache memory: 39.16 GiB
(EngineCore pid=187) INFO 05-01 19:03:12 [kv_cache_utils.py:1711] GPU KV cache size: 256,608 tokens
(EngineCore pid=187) INFO 05-01 19:03:12 [kv_cache_utils.py:1716] Maximum concurrency for 40,960 tokens per request: 6.26x
(EngineCore pid=187) INFO 05-01 19:03:20 [gpu_model_runner.py:5012] Graph capturing finished in 8 secs, took 0.91 GiB
(EngineCore pid=187) INFO 05-01 19:03:21 [core.py:250] init engine (profile, create kv cache, warmup model) took 172.60 seconds
(APIServer pid=1) INFO 05-01 19:03:22 [api_server.py:2012] Starting vLLM API server 0 on http://0.0.0.0:8000
(APIServer pid=1) INFO:     Application startup complete.
"""

FAILURE = """\
(EngineCore pid=187) ERROR 05-03 02:11:27 [core.py:1043] EngineCore encountered a fatal error.
(EngineCore pid=187) ERROR 05-03 02:11:27 [core.py:1043] Traceback (most recent call last):
(EngineCore pid=187) ERROR 05-03 02:11:27 [core.py:1043]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 1067, in run_busy_loop
(EngineCore pid=187) ERROR 05-03 02:11:27 [core.py:1043]     self._process_engine_step()
(EngineCore pid=187) ERROR 05-03 02:11:27 [core.py:1043]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 397, in step
(EngineCore pid=187) ERROR 05-03 02:11:27 [core.py:1043]     model_output = self.execute_model_with_error_logging(
(EngineCore pid=187) ERROR 05-03 02:11:27 [core.py:1043] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.28 GiB. GPU 0 has a total capacity of 79.19 GiB of which 6.02 GiB is free. Including non-PyTorch memory, this process has 73.16 GiB memory in use.
(APIServer pid=1) ERROR 05-03 02:11:27 [async_llm.py:546] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
"""


def _serving_block(rng: random.Random, size: int) -> bytes:
    """Varied serving lines (about ``size`` bytes): what a busy server logs for days."""
    out: list[str] = []
    n = 0
    while n < size:
        t = f"05-0{rng.randint(1, 3)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        rid = f"chatcmpl-{rng.getrandbits(96):024x}"
        kind = rng.random()
        if kind < 0.30:
            line = (f"(APIServer pid=1) INFO {t} [loggers.py:236] Engine 000: Avg prompt throughput: "
                    f"{rng.uniform(0, 40000):.1f} tokens/s, Avg generation throughput: {rng.uniform(0, 3000):.1f} tokens/s, "
                    f"Running: {rng.randint(0, 128)} reqs, Waiting: {rng.randint(0, 40)} reqs, GPU KV cache usage: "
                    f"{rng.uniform(0, 100):.1f}%, Prefix cache hit rate: {rng.uniform(0, 100):.1f}%")
        elif kind < 0.62:
            line = (f"(APIServer pid=1) INFO:     10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}:"
                    f"{rng.randint(1024, 65535)} - \"POST /v1/chat/completions HTTP/1.1\" 200 OK")
        elif kind < 0.82:
            line = (f"(APIServer pid=1) INFO {t} [logger.py:71] Received request {rid}: params: SamplingParams(n=1, "
                    f"temperature={rng.choice([0.0, 0.7, 1.0])}, top_p=1.0, max_tokens={rng.randint(16, 4096)}), "
                    f"prompt_token_ids: None, lora_request: None.")
        elif kind < 0.9995:
            line = f"(APIServer pid=1) INFO {t} [async_llm.py:328] Finished request {rid}."
        else:
            line = (f"(APIServer pid=1) WARNING {t} [serving_chat.py:210] Request {rid} has max_tokens larger than "
                    f"the remaining context; clamped to {rng.randint(100, 4000)}")
        out.append(line)
        n += len(line) + 1
    return ("\n".join(out) + "\n").encode()


def generate(path: Path, size_mb: int, seed: int = 7) -> Path:
    target = size_mb * MB
    if path.exists() and abs(path.stat().st_size - target) < 4 * MB:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    blocks = [_serving_block(rng, 4 * MB) for _ in range(4)]
    tmp = path.with_suffix(".part")
    with open(tmp, "wb") as fh:
        fh.write(STARTUP.encode())
        written = len(STARTUP)
        i = 0
        while written < target - 8 * MB:
            block = blocks[i % len(blocks)]
            fh.write(block)
            written += len(block)
            i += 1
        fh.write(FAILURE.encode())
        fh.write(blocks[0][: 2 * MB].rsplit(b"\n", 1)[0] + b"\n")
    tmp.replace(path)
    return path


def generate_random_text(path: Path, size_mb: int, seed: int = 11) -> Path:
    """Random printable bytes with a newline every ~100 bytes on average (and some very long lines)."""
    target = size_mb * MB
    if path.exists() and abs(path.stat().st_size - target) < 4 * MB:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    table = bytes((32 + i % 95) if i % 100 else 10 for i in range(256))
    block = bytearray(rng.randbytes(4 * MB)).translate(table)
    block[1_000_000:1_000_000] = b"x" * (3 * MB)  # one line of 3 MB in every block
    tmp = path.with_suffix(".part")
    with open(tmp, "wb") as fh:
        written = 0
        while written < target:
            fh.write(block)
            written += len(block)
    tmp.replace(path)
    return path


# One start-up that dies in the profile run (a real V1 start-up and failure, from the fixtures).
_RESTART = ((ROOT / "tests/fixtures/logs/healthy/v0.9.2-v1-profile.log").read_text().splitlines(keepends=True)[:12]
            + (ROOT / "tests/fixtures/logs/v1-profile-oom.log").read_text().splitlines(keepends=True)[2:])
_PID = re.compile(r"pid=\d+")
_STAMP = re.compile(r"\b\d\d-\d\d \d\d:\d\d:\d\d\b")


def generate_crash_loop(path: Path, size_mb: int, seed: int = 3) -> Path:
    """Start-ups repeated until the size is reached, each with new pids and times: a supervisor's crash loop."""
    target = size_mb * MB
    if path.exists() and abs(path.stat().st_size - target) < 4 * MB:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    unit = "".join(_RESTART)
    tmp = path.with_suffix(".part")
    with open(tmp, "w", encoding="utf-8") as fh:
        written = 0
        while written < target:
            pids = {}
            stamp = f"{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
            text = _PID.sub(lambda m: pids.setdefault(m.group(), f"pid={rng.randint(100, 99999)}"), unit)
            text = _STAMP.sub(lambda m: f"{stamp}:{rng.randint(0, 59):02d}", text)
            fh.write(text)
            written += len(text)
    tmp.replace(path)
    return path


_WORDS = ("alpha beta gamma delta request worker tokenizer sampler scheduler connection timeout reset peer stream "
          "chunk decode prompt template schema grammar tool json detokenize abort cancel").split()


def generate_distinct_errors(path: Path, size_mb: int, seed: int = 5) -> Path:
    """A start-up, then error and warning lines no two alike (ids, words, numbers), then a CUDA OOM."""
    target = size_mb * MB
    if path.exists() and abs(path.stat().st_size - target) < 4 * MB:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    tmp = path.with_suffix(".part")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(STARTUP)
        written = len(STARTUP)
        lines: list[str] = []
        while written < target - len(FAILURE):
            rid = f"{rng.getrandbits(64):016x}"
            t = f"05-0{rng.randint(1, 3)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
            words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 7)))
            k = rng.random()
            if k < 0.4:
                line = (f"(APIServer pid=1) ERROR {t} [serving_chat.py:{rng.randint(1, 999)}] Error in request "
                        f"chatcmpl-{rid}: {words} {rng.randint(0, 10**9)}\n")
            elif k < 0.7:
                line = f"(APIServer pid=1) ERROR {t} [launcher.py:{rng.randint(1, 99)}] Exception in ASGI application {rid}: {words}\n"
            else:
                line = (f"(APIServer pid=1) WARNING {t} [protocol.py:{rng.randint(1, 99)}] The following fields were "
                        f"present in the request but ignored: {{'{rng.choice(_WORDS)}_{rid}'}}\n")
            lines.append(line)
            written += len(line)
            if len(lines) >= 10000:
                fh.write("".join(lines))
                lines.clear()
        fh.write("".join(lines))
        fh.write(FAILURE)
    tmp.replace(path)
    return path


def generate_log(kind: str, size_mb: int, directory: Path = BENCH_DIR) -> Path:
    path = directory / f"{kind}-{size_mb}mb.log"
    if kind == "serving":
        return generate(path, size_mb)
    if kind == "crash-loop":
        return generate_crash_loop(path, size_mb)
    if kind == "distinct-errors":
        return generate_distinct_errors(path, size_mb)
    return generate_random_text(path, size_mb)


def grep_pattern() -> str:
    """The prefilter's keywords as one POSIX extended regex (caseless ones spelled with [xX] classes)."""
    from oomguard.diagnose.prefilter import CASELESS, KEYWORDS

    def ere(word: bytes, caseless: bool) -> str:
        text = word.decode("utf-8")
        end = "$" if text.endswith("\n") else ""
        out = []
        for ch in text.rstrip("\n"):
            if caseless and ch.isalpha():
                out.append(f"[{ch.lower()}{ch.upper()}]")
            elif ch in ".^$*+?()[]{}|\\":
                out.append("\\" + ch)
            else:
                out.append(ch)
        return "".join(out) + end

    return "|".join([ere(k, False) for k in KEYWORDS] + [ere(k, True) for k in CASELESS])


# The second grep reference: what someone would type to look for trouble in a log.
SMALL_PATTERN = "Error|error|Traceback|out of memory"


def run_grep(path: Path, pattern: str) -> dict:
    r = timed_run(["grep", "-E", "-c", "-e", pattern, str(path)], env={**os.environ, "LC_ALL": "C"}, what="grep")
    wall, cpu = r.seconds, r.cpu_seconds
    size = path.stat().st_size / MB
    return {"seconds": wall, "mb_per_s": size / wall, "cpu_seconds": cpu, "mb_per_cpu_s": size / cpu if cpu else 0.0,
            "lines": int(r.proc.stdout.strip() or 0)}


JOBS: list[int | None] = [None]  # --jobs: OOMGUARD_SCAN_JOBS for the CLI (None: its own default)
SPLIT: list[bool] = [False]  # --split-cpu
# --split-cpu: the CLI through this wrapper, which says on stderr what its own process and its children (the scan's
# worker processes) spent: the scanning process's share is what bounds the wall clock when CPUs are free.
SPLIT_CHILD = r"""
import resource, sys
from oomguard.cli.main import main
try:
    rc = main(sys.argv[1:])
except SystemExit as exc:
    rc = exc.code if isinstance(exc.code, int) else 2
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stderr.write("\n@@CPU %.3f %.3f\n" % (me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime))
sys.exit(rc)
"""


def child_env(engine: str | None = None) -> dict[str, str]:
    """The CLI's environment: bytecode caching on (an installed package has its .pyc files; a sandbox that sets
    PYTHONDONTWRITEBYTECODE would otherwise recompile every module in every run), the engine and the scan's worker
    processes if forced."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if engine:
        env["OOMGUARD_PREFILTER_ENGINE"] = engine
    if JOBS[0] is not None:
        env["OOMGUARD_SCAN_JOBS"] = str(JOBS[0])
    return env


def warm_up(engine: str | None = None) -> None:
    """One untimed run on a tiny log: writes the bytecode caches, as an installed package has them."""
    tiny = BENCH_DIR / "warm-up.log"
    tiny.parent.mkdir(parents=True, exist_ok=True)
    tiny.write_text(STARTUP, encoding="utf-8")
    subprocess.run([sys.executable, "-m", "oomguard.cli.main", "diagnose", "--format", "json", str(tiny)],
                   capture_output=True, env=child_env(engine))
    tiny.unlink()


def warm_page_cache(path: Path) -> None:
    """Read the file once, untimed: each timed run (diagnose, then the greps) then finds it in the page cache,
    as the greps after it always did (on a machine short of memory the first reader of a 1 GB file otherwise
    pays the disk: 2.5 CPU-s and 82 s of wall clock, with grep at 4 s right after it)."""
    with open(path, "rb", buffering=0) as fh:
        while fh.read(1 << 20):
            pass


def run_once(path: Path, engine: str | None = None) -> dict:
    warm_page_cache(path)
    env = child_env(engine)
    load = os.getloadavg()[0]
    head = [sys.executable, "-c", SPLIT_CHILD] if SPLIT[0] else [sys.executable, "-m", "oomguard.cli.main"]
    r = timed_run([*head, "diagnose", "--format", "json", str(path)], env=env, what="diagnose")
    split = r.proc.stderr.rsplit("@@CPU ", 1)[1].split() if SPLIT[0] and "@@CPU " in r.proc.stderr else None
    wall, cpu, peak_kib = r.seconds, r.cpu_seconds, r.peak_rss_kib
    data = json.loads(r.proc.stdout)
    return {
        "seconds": wall,
        "mb_per_s": path.stat().st_size / MB / wall,
        "cpu_seconds": cpu,
        # Per CPU-second: what the run achieves on an otherwise idle core (the wall figure suffers when the
        # machine is shared).
        "mb_per_cpu_s": path.stat().st_size / MB / cpu if cpu else 0.0,
        # ru_maxrss of children is the largest child so far; a run that is not larger than an earlier one
        # reports the earlier peak, which is an upper bound.
        "peak_rss_mib": peak_kib / 1024,
        "top_class": data["verdicts"][0]["class"] if data["verdicts"] else None,
        "exit": r.proc.returncode,
        "load": load,
        "notes": data["inputs"][0]["notes"] if data.get("inputs") else [],
        "split": (float(split[0]), float(split[1])) if split else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", choices=sorted(EXPECTED), default="serving", help="which synthetic log")
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=BENCH_DIR, help="where the generated log is kept")
    parser.add_argument("--keep", action="store_true", help="keep the generated log for later runs")
    parser.add_argument("--random-text", action="store_true", help="same as --log random-text")
    parser.add_argument("--vs-grep", action="store_true", help="time grep -E -c on the same file after each run")
    parser.add_argument("--engine", choices=("hyperscan", "re2", "re"), help="force a prefilter engine")
    parser.add_argument("--jobs", type=int, metavar="N", help="OOMGUARD_SCAN_JOBS for diagnose: N worker processes "
                        "scan a large log (1: none; default: diagnose's own choice from the CPUs)")
    parser.add_argument("--split-cpu", action="store_true", help="say the CPU-s of diagnose's own process and of its "
                        "scan worker processes apart (runs the CLI through a small wrapper)")
    args = parser.parse_args()
    JOBS[0] = args.jobs
    SPLIT[0] = args.split_cpu
    kind = "random-text" if args.random_text else args.log
    t0 = time.perf_counter()
    path = generate_log(kind, args.size_mb, args.dir)
    size = path.stat().st_size / MB
    print(f"log: {path} ({kind}, {size:.0f} MB, generated/checked in {time.perf_counter() - t0:.1f} s)")
    from oomguard.diagnose import scanner
    from oomguard.diagnose.prefilter import engine

    os.environ.update({k: v for k, v in child_env().items() if k == "OOMGUARD_SCAN_JOBS"})
    try:
        from oomguard.diagnose import ahead

        workers = ahead.workers() if path.stat().st_size >= scanner.PARALLEL_FLOOR_BYTES else 0
    except (ImportError, AttributeError):  # a tree from before the workers (PYTHONPATH=<older tree>/src)
        workers = 0
    print(f"prefilter engine: {args.engine or engine().name}; cpus: {os.cpu_count()}; scan worker processes: "
          f"{workers} (CPU-s include theirs); load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    pattern = grep_pattern() if args.vs_grep else ""
    warm_up(args.engine)
    results, greps, smalls = [], [], []
    try:
        for i in range(args.runs):
            r = run_once(path, args.engine)
            results.append(r)
            line = (f"run {i + 1}: diagnose {r['seconds']:.2f} s, {r['cpu_seconds']:.2f} CPU-s ({r['mb_per_s']:.0f} MB/s, "
                    f"{r['mb_per_cpu_s']:.0f} MB per CPU-s), peak RSS {r['peak_rss_mib']:.0f} MiB, top verdict {r['top_class']} (exit {r['exit']})")
            if r["split"]:
                line += f" [own process {r['split'][0]:.2f} CPU-s, worker processes {r['split'][1]:.2f}]"
            if args.vs_grep:
                g = run_grep(path, pattern)
                greps.append(g)
                line += (f" | grep -E keywords {g['seconds']:.2f} s, {g['cpu_seconds']:.2f} CPU-s ({g['mb_per_s']:.0f} MB/s, {g['mb_per_cpu_s']:.0f} MB "
                         f"per CPU-s, {g['lines']:,} lines)")
                g = run_grep(path, SMALL_PATTERN)
                smalls.append(g)
                line += (f" | grep -E small {g['seconds']:.2f} s, {g['cpu_seconds']:.2f} CPU-s ({g['mb_per_s']:.0f} MB/s, {g['mb_per_cpu_s']:.0f} MB "
                         f"per CPU-s, {g['lines']:,} lines)")
            print(line + f" | load {r['load']:.2f}")
    finally:
        if not args.keep:
            path.unlink(missing_ok=True)
    for note in results[-1]["notes"]:
        print(f"note: {note}")
    best = max(results, key=lambda r: r["mb_per_s"])
    median = statistics.median(r["mb_per_s"] for r in results)
    summary = (f"diagnose: best {best['mb_per_s']:.0f} MB/s, median {median:.0f} MB/s (whole process, wall clock), "
               f"{max(r['mb_per_cpu_s'] for r in results):.0f} MB per CPU-second (fewest CPU-s "
               f"{min(r['cpu_seconds'] for r in results):.2f}, median {statistics.median(r['cpu_seconds'] for r in results):.2f}), "
               f"peak RSS {max(r['peak_rss_mib'] for r in results):.0f} MiB")
    for label, runs in (("grep -E keywords", greps), (f"grep -E '{SMALL_PATTERN}'", smalls)):
        if not runs:
            continue
        gbest = max(g["mb_per_s"] for g in runs)
        gmedian = statistics.median(g["mb_per_s"] for g in runs)
        pairs = [r["mb_per_s"] / g["mb_per_s"] for r, g in zip(results, runs)]
        gcpu = max(g["mb_per_cpu_s"] for g in runs)
        summary += (f"\n{label}: best {gbest:.0f} MB/s, median {gmedian:.0f} MB/s, {gcpu:.0f} MB per CPU-second; "
                    f"diagnose/grep per run: median {statistics.median(pairs):.2f}x, best-vs-best "
                    f"{best['mb_per_s'] / gbest:.2f}x, per CPU-second {max(r['mb_per_cpu_s'] for r in results) / gcpu:.2f}x")
    print(summary)
    expected = EXPECTED[kind]
    found = all(r["top_class"] == expected for r in results)
    print(f"expected top verdict {expected}: {'found' if found else 'NOT found'} in every run")
    return 0 if found else 1


if __name__ == "__main__":
    raise SystemExit(main())
