"""Where a command's start-up goes: a bare interpreter, the stdlib modules it imports, + oomguard's modules, the whole run.

Each line is a fresh interpreter (best and median CPU of N): ``python -c pass``; importing exactly the standard-library
modules the command imports; those plus the oomguard modules it imports; the command itself. The differences are the
stdlib's share, the cost of defining oomguard's modules (dataclasses, enums, tables), and the command's own work.

    .venv/bin/python benchmarks/cli_startup_floor.py [-n 15] [--python PYTHON] [-- plan --model Qwen/Qwen3-8B --gpu H100 --json]

``--python`` measures another interpreter on this tree's ``src`` (no third-party module is needed by plan/fit).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
DEFAULT = ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--json"]


def _cpu(python: str, code: str, env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([python, "-c", code], env=env, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=15)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("argv", nargs="*", help="the oomguard command line (default: plan --json on a catalog model)")
    opts = ap.parse_args()
    argv = opts.argv or DEFAULT
    with tempfile.TemporaryDirectory(prefix="oomguard-pyc-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=str(SRC), PYTHONPYCACHEPREFIX=cache, HF_HUB_OFFLINE="1")
        run = f"import sys; sys.argv = ['oomguard'] + {argv!r}; from oomguard.cli.main import main; main()"
        probe = ("import sys, json; base = set(sys.modules)\n" + run.replace("main()", "") +
                 "\ntry: main()\nfinally: sys.stderr.write('\\n' + json.dumps(sorted(set(sys.modules) - base)))")
        done = subprocess.run([opts.python, "-c", probe], capture_output=True, text=True, env=env)
        mods = json.loads(done.stderr.strip().splitlines()[-1])
        std = [m for m in mods if not m.startswith(("oomguard", "_"))]
        own = [m for m in mods if m.startswith("oomguard")]
        third = sorted({m.split(".")[0] for m in std} - set(sys.stdlib_module_names))
        std = [m for m in std if m.split(".")[0] in sys.stdlib_module_names]
        cases = {"python -c pass": "pass",
                 "+ its stdlib modules": "import " + ",".join(std),
                 "+ its oomguard (and other) modules": "import " + ",".join(std + third + own),
                 "the whole run": run}
        samples: dict[str, list[float]] = {k: [] for k in cases}
        for code in cases.values():
            _cpu(opts.python, code, env)  # warm: bytecode, page cache
        for _ in range(opts.n):
            for name, code in cases.items():
                samples[name].append(_cpu(opts.python, code, env))
    version = subprocess.run([opts.python, "-V"], capture_output=True, text=True).stdout.strip()
    base = min(samples["python -c pass"])
    print(f"oomguard {' '.join(argv)}\n{opts.python} ({version}); load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          f"{len(std)} stdlib, {len(third)} third-party packages, {len(own)} oomguard modules; CPU ms, {opts.n} runs")
    for name, values in samples.items():
        print(f"  {name:36} best {min(values) * 1e3:6.1f} ({min(values) / base:4.1f}x)  median {statistics.median(values) * 1e3:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
