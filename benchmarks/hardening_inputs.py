"""Time and peak memory of the CLI on the inputs that used to hang or exhaust memory (issues 13, 20).

Run: ``python benchmarks/hardening_inputs.py``. Prints one row per reproducer: exit status,
wall seconds, CPU seconds (steadier on a shared machine) and the child's peak RSS. The targets the issue states are 30 s and 1 GiB per
run; the regression tests in ``tests/unit/test_hardening_inputs.py`` enforce looser bounds
so they stay green on a busy machine.
"""

from __future__ import annotations

import gzip
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOG = ROOT / "tests" / "fixtures" / "logs" / "v1-clean-start.log"
HOST_ROOT = ROOT / "tests" / "fixtures" / "host" / "roots" / "two_numa_4x4090"
LAUGHS = "".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n']
    + [f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]\n" for p, c in zip("abcdefgh", "bcdefghi")]
)


def _cases(d: Path) -> list[tuple[str, list[str]]]:
    (d / "laughs.yaml").write_text("model: Qwen/Qwen3-8B\n" + LAUGHS)
    (d / "double.sh").write_text("A=xx\n" + "A=$A$A\n" * 40 + "vllm serve $A\n")
    (d / "big.yaml").write_text("model: Qwen/Qwen3-8B\n" + "".join(f"k{i}: {'x' * 50}\n" for i in range(16000)))
    (d / "long.sh").write_text("vllm serve m " + "a" * (512 << 10) + "\n")
    (d / "flags.sh").write_text("vllm serve Qwen/Qwen3-8B \\\n" + "  --max-model-len 8192 \\\n" * 40000 + "  --max-num-seqs 8\n")
    with gzip.open(d / "bomb.log.gz", "wb", compresslevel=9) as fh:
        chunk = b"(APIServer pid=1) INFO [loggers.py:127] Engine 000: Running: 0 reqs\n" * 40_000
        for _ in range(100):  # written in pieces: a forked child inherits the parent's peak RSS
            fh.write(chunk)
    (d / "unknown.sh").write_text("vllm serve Qwen/Qwen3-8B \\\n" + "".join(f"  --k{i} x \\\n" for i in range(20000))
                                  + "  --max-num-seqs 8\n")
    (d / "trailing.log.gz").write_bytes(gzip.compress(LOG.read_bytes()) + b"junk")
    _write_host_inputs(d)
    model_id = "Qwen/" + "".join(random.Random(7).choice("abcdefghijklmnopqrstuvwxyz0123456789-.") for _ in range(65536))
    return [
        ("plan --model /dev/zero", ["plan", "--model", "/dev/zero", "--gpu", "A100"]),
        ("diagnose /dev/urandom", ["diagnose", "/dev/urandom"]),
        ("check billion-laughs.yaml", ["check", str(d / "laughs.yaml"), "--gpu", "A100"]),
        ("plan 1 KiB doubling script", ["plan", str(d / "double.sh"), "--gpu", "A100"]),
        ("check 1 MiB YAML", ["check", str(d / "big.yaml"), "--gpu", "A100"]),
        ("check 40k repeated flags (1 MiB)", ["check", str(d / "flags.sh"), "--gpu", "A100"]),
        ("check 20k unknown flags", ["check", str(d / "unknown.sh"), "--gpu", "A100"]),
        ("diagnose --launch 512 KiB line", ["diagnose", str(LOG), "--launch", str(d / "long.sh")]),
        ("diagnose gzip, 280 MiB of lines", ["diagnose", str(d / "bomb.log.gz")]),
        ("diagnose gzip + trailing bytes", ["diagnose", str(d / "trailing.log.gz")]),
        # issue 20: host readers on large inputs, searches sized by absurd parallel sizes, did-you-mean
        ("host 31 MB nvidia-smi CSV series", ["host", "--root", str(HOST_ROOT), "--nvidia-smi", str(d / "series.csv")]),
        ("check --nvidia-smi 31 MB CSV series", ["check", "--gpu", "H100", "--nvidia-smi", str(d / "series.csv"), "--",
                                                 "vllm", "serve", "Qwen/Qwen3-8B"]),
        ("host topo, 200 GPUs + 20 MB after", ["host", "--root", str(HOST_ROOT), "--topo", str(d / "topo200.txt")]),
        ("host topo, 3000 devices (36 MB)", ["host", "--root", str(HOST_ROOT), "--topo", str(d / "topo3000.txt")]),
        ("plan --pipeline-parallel-size 10^6", ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100",
                                                "--pipeline-parallel-size", "1000000"]),
        ("plan TP 10^5 x PP 10^5", ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--tensor-parallel-size",
                                    "100000", "--pipeline-parallel-size", "100000"]),
        ("fit --num-gpus 65536", ["fit", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--num-gpus", "65536"]),
        ("plan --model <64 KiB id>", ["plan", "--model", model_id, "--gpu", "H100"]),
    ]


def _write_host_inputs(d: Path) -> None:
    """A 31 MB `nvidia-smi --query-gpu ... -l 1` series of 8 GPUs, and two large topology matrices."""
    r = random.Random(1)
    with open(d / "series.csv", "w") as fh:
        fh.write("index, uuid, name, memory.total [MiB], memory.used [MiB]\n")
        size = 0
        while size < 31 << 20:
            for i in range(8):
                line = f"{i}, GPU-{i:08d}-aaaa-bbbb-cccc-0123456789ab, NVIDIA H100 80GB HBM3, 81559 MiB, {r.randint(0, 81559)} MiB\n"
                fh.write(line)
                size += len(line)
        fh.write("gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n")
        for i in range(8):
            fh.write(f"GPU-{i:08d}-aaaa-bbbb-cccc-0123456789ab, {1000 + i}, python3, 70000 MiB\n")
    for n, junk, name in ((200, 2_000_000, "topo200.txt"), (3000, 0, "topo3000.txt")):
        with open(d / name, "w") as fh:
            fh.write("\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\n")
            for i in range(n):
                cells = ("X" if i == j else ("NV18" if i // 8 == j // 8 else "SYS") for j in range(n))
                fh.write(f"GPU{i}\t" + "\t".join(cells) + f"\t{(i % 2) * 32}-{(i % 2) * 32 + 31}\t{i % 2}\n")
            fh.write("\nLegend:\n" + "junk line\n" * junk)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="oomguard-bench-") as tmp:
        d = Path(tmp)
        print(f"{'case':38} {'exit':>4} {'wall s':>7} {'cpu s':>6} {'peak RSS MiB':>13}")
        for name, args in _cases(d):
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            before = usage.ru_maxrss
            cpu0 = usage.ru_utime + usage.ru_stime
            t0 = time.monotonic()
            proc = subprocess.run([sys.executable, "-m", "oomguard.cli.main", *args], capture_output=True,
                                  timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
            wall = time.monotonic() - t0
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            peak, cpu = usage.ru_maxrss, usage.ru_utime + usage.ru_stime - cpu0
            # ru_maxrss of children is the largest of any child so far: report it only when it grew.
            rss = f"{peak / 1024:.0f}" if peak > before else f"<= {before / 1024:.0f}"
            tb = " TRACEBACK" if b"Traceback" in proc.stderr else ""
            internal = " INTERNAL ERROR" if b"internal error" in proc.stderr else ""
            print(f"{name:38} {proc.returncode:>4} {wall:>7.2f} {cpu:>6.2f} {rss:>13}{tb}{internal}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
