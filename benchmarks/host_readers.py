"""Time and peak memory of the host readers on large captures: an nvidia-smi CSV series, a long
``watch nvidia-smi`` table capture and a topology matrix of the most devices oomguard reads.

Generates the inputs (once, in ``--dir``; never committed), then runs the real CLI as separate processes
(``host``, ``check --nvidia-smi``, ``diagnose``) on them and prints, per command: wall seconds, CPU seconds
(user + system of the child: the machine is shared), peak RSS, exit status. Issue 20 item 4: a large
nvidia-smi CSV or topology matrix in seconds and tens of MB (the issue's 31 MB CSV took > 30 s and 540 MB
in ``host``).

Usage: .venv/bin/python benchmarks/host_readers.py [--csv-mb 64] [--table-mb 32] [--runs 3] [--dir /tmp/oomguard-host-bench]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MB = 1_000_000
GPUS = 8


def _uuid(i: int) -> str:
    return f"GPU-5d3c2a1b-8e7f-4a6b-9c0d-{i:012x}"


def generate_csv(path: Path, size_mb: int) -> Path:
    """``nvidia-smi --query-gpu=timestamp,index,uuid,name,memory.total,memory.used --format=csv -l 1`` for
    days on an 8-GPU host (the header repeated now and then, as a restarted capture does), then the
    compute apps."""
    if path.exists() and abs(path.stat().st_size - size_mb * MB) < MB:
        return path
    rng = random.Random(3)
    header = "timestamp, index, uuid, name, memory.total [MiB], memory.used [MiB]\n"
    out = [header]
    n = len(header)
    used = [rng.randint(500, 70000) for _ in range(GPUS)]
    t = 0
    with open(path, "w", encoding="utf-8") as fh:
        while n < size_mb * MB - 4096:
            t += 1
            stamp = f"2024/05/{1 + t // 86400 % 28:02d} {t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d}.{t % 1000:03d}"
            for i in range(GPUS):
                used[i] = max(0, min(81000, used[i] + rng.randint(-300, 300)))
                line = f"{stamp}, {i}, {_uuid(i)}, NVIDIA A100-SXM4-80GB, 81920 MiB, {used[i]} MiB\n"
                out.append(line)
                n += len(line)
            if t % 50000 == 0:
                out.append(header)
                n += len(header)
            if len(out) > 20000:
                fh.write("".join(out))
                out.clear()
        out.append("gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n")
        for i in range(GPUS):
            out.append(f"{_uuid(i)}, {3000 + i}, /usr/bin/python3, {max(1, used[i] - 400)} MiB\n")  # never negative (host refuses '-65 MiB', exit 2)
        fh.write("".join(out))
    return path


_TABLE = """\
{stamp}
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|=========================================+========================+======================|
{gpus}+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |
|=========================================================================================|
{procs}+-----------------------------------------------------------------------------------------+
"""


def generate_table(path: Path, size_mb: int) -> Path:
    """``watch -n 1 nvidia-smi`` captured for hours: the default table, 8 GPUs, repeated."""
    if path.exists() and abs(path.stat().st_size - size_mb * MB) < MB:
        return path
    rng = random.Random(5)
    with open(path, "w", encoding="utf-8") as fh:
        n = t = 0
        chunk: list[str] = []
        while n < size_mb * MB:
            t += 1
            gpus = "".join(
                f"|   {i}  NVIDIA A100-SXM4-80GB          On  |   00000000:{16 + i:02X}:00.0 Off |                    0 |\n"
                f"| N/A   34C    P0            113W /  400W |  {rng.randint(500, 80000):5d}MiB /  81920MiB |     {rng.randint(0, 99):2d}%      Default |\n"
                for i in range(GPUS))
            procs = "".join(f"|    {i}   N/A  N/A     {3000 + i:6d}      C   python3                              {rng.randint(400, 79000):6d}MiB |\n"
                            for i in range(GPUS))
            block = _TABLE.format(stamp=f"Thu May  2 {t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d} 2024", gpus=gpus,
                                  procs=procs)
            chunk.append(block)
            n += len(block)
            if len(chunk) > 200:
                fh.write("".join(chunk))
                chunk.clear()
        fh.write("".join(chunk))
    return path


def generate_topology(path: Path, devices: int) -> Path:
    """A ``nvidia-smi topo -m`` matrix of ``devices`` devices (GPUs, then 8 NICs), the legend, then a
    megabyte of pasted text after it (a reader must stop at the end of the matrix)."""
    gpus = devices - 8
    names = [f"GPU{i}" for i in range(gpus)] + [f"NIC{i}" for i in range(8)]
    lines = ["\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for a, row in enumerate(names):
        cells = []
        for b in range(len(names)):
            if a == b:
                cells.append("X")
            elif a < gpus and b < gpus:
                cells.append("NV12" if a // 8 == b // 8 else "SYS")
            else:
                cells.append("PXB" if (a % 8) == (b % 8) else "SYS")
        tail = f"\t{(a % 2) * 64}-{(a % 2) * 64 + 63}\t{a % 2}\tN/A" if a < gpus else ""
        lines.append(row + "\t" + "\t".join(cells) + tail)
    lines += ["", "Legend:", "", "  X    = Self", "  SYS  = Connection traversing PCIe as well as the SMP interconnect",
              "  NV#  = Connection traversing a bonded set of # NVLinks", "", "NIC Legend:", ""]
    lines += [f"  NIC{i}: mlx5_{i}" for i in range(8)]
    lines += ["pasted text after the matrix " * 4] * 8000
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(argv: list[str]) -> dict:
    """One CLI run; its own CPU time and peak RSS (``os.wait4``: this child's, not the largest so far)."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "oomguard.cli.main", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})
    err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024,
            "exit": proc.returncode, "err": err.strip().splitlines()[-1:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv-mb", type=int, default=64)
    parser.add_argument("--table-mb", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/oomguard-host-bench"))
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    from oomguard.inputs.topology import MAX_DEVICES

    csv = generate_csv(args.dir / f"gpus-{args.csv_mb}mb.csv", args.csv_mb)
    table = generate_table(args.dir / f"smi-table-{args.table_mb}mb.txt", args.table_mb)
    topo = generate_topology(args.dir / f"topo-{MAX_DEVICES}.txt", MAX_DEVICES)
    fake_root = str(ROOT / "tests/fixtures/host/roots/two_numa_4x4090")
    launch = ["--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"]
    cases = {
        f"host --nvidia-smi CSV ({csv.stat().st_size / MB:.0f} MB)": ["host", "--root", fake_root, "--nvidia-smi", str(csv),
                                                                       "--format", "json"],
        f"host --topo ({MAX_DEVICES} devices, {topo.stat().st_size / MB:.1f} MB)": ["host", "--root", fake_root, "--topo",
                                                                                   str(topo), "--format", "json"],
        f"check --nvidia-smi CSV ({csv.stat().st_size / MB:.0f} MB)": ["check", "--nvidia-smi", str(csv), *launch],
        f"check --nvidia-smi table ({table.stat().st_size / MB:.0f} MB)": ["check", "--nvidia-smi", str(table), *launch],
        f"check --topo ({MAX_DEVICES} devices)": ["check", "--gpu", "A100-80GB", "--topo", str(topo), *launch],
        f"diagnose CSV ({csv.stat().st_size / MB:.0f} MB)": ["diagnose", "--format", "json", str(csv)],
        f"diagnose table ({table.stat().st_size / MB:.0f} MB)": ["diagnose", "--format", "json", str(table)],
    }
    print(f"cpus: {os.cpu_count()}; load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    run(["diagnose", "--format", "json", str(ROOT / "tests/fixtures/host/gpus/a100_shared.csv")])  # warm bytecode
    for label, argv in cases.items():
        results = [run(argv) for _ in range(args.runs)]
        wall = statistics.median(r["wall"] for r in results)
        cpu = statistics.median(r["cpu"] for r in results)
        rss = max(r["rss_mib"] for r in results)
        exits = sorted({r["exit"] for r in results})
        err = f" ({results[-1]['err'][0][:120]})" if results[-1]["exit"] >= 2 and results[-1]["err"] else ""
        print(f"{label:44} median wall {wall:6.2f} s, CPU {cpu:6.2f} s, peak RSS {rss:5.0f} MiB, exit {exits}{err}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
