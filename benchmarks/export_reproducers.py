"""The injection, leak and data-loss reproducers of issue 20 item 5 (and issue 17's export items).

Run: ``python benchmarks/export_reproducers.py [SRC]``: one JSON row per reproducer,
``[what, exit status, harm]`` where harm is ``false`` when nothing bad happened (else what
leaked or became structure). ``SRC`` is a ``src`` directory to run instead of this checkout's
(``git archive e772027 src | tar -x -C /tmp/old`` gives the code before the fix, to compare).
The same cases are asserted in ``tests/unit/export/test_export_injection.py`` and
``test_export_passes_check.py``.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
py = sys.executable
SRC = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "src")
env = dict(os.environ, PYTHONPATH=SRC)
WORK = tempfile.mkdtemp(prefix="oomguard-repro-")
os.chdir(WORK)


def run(*a, cwd=WORK):
    p = subprocess.run([py, "-m", "oomguard.cli.main", *a], capture_output=True, env=env, cwd=cwd, timeout=120)
    p.stdout, p.stderr = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")  # no newline translation
    return p
rows = []


def row(name, p, bad):
    rows.append((name, p.returncode, bad))
# 1 model id with newline -> systemd
p = run("export", "launch", "--to", "systemd", "--", "vllm", "serve", "m\n[Service]\nExecStartPre=/bin/evil")
row("model 'm\\n[Service]\\nExecStartPre=/bin/evil' -> systemd", p, bool(re.search(r"^ExecStartPre=", p.stdout, re.M)) or p.stdout.split("\n").count("[Service]") > 1)
# 2 CR in model -> systemd (systemd ends lines at CR)
p = run("export", "launch", "--to", "systemd", "--", "vllm", "serve", "m\rExecStartPre=/bin/evil")
row("model 'm\\rExecStartPre=/bin/evil' -> systemd (systemd ends a line at CR)", p, bool(re.search(r"\rExecStartPre=", p.stdout)))
# 3 hostile file name
name = "x\nExecStartPre=evil\nfoo: bar\ntouch pwned\n#.sh"
open(name, "w").write("vllm serve m --max-model-len 4096\n")
for t in ("systemd", "docker", "compose", "kubernetes"):
    p = run("export", "launch", name, "--to", t)
    row(f"launch file 'x\\nExecStartPre=evil\\nfoo: bar\\ntouch pwned' -> {t}", p, bool(re.search(r"^(ExecStartPre=evil|foo: bar|touch pwned)$", p.stdout, re.M)))
# 4 U+0085 in served-model-name
for t in ("systemd", "compose", "docker"):
    p = run("export", "launch", "--to", t, "--", "vllm", "serve", "m", "--served-model-name", "x\x85ExecStartPre=/bin/evil")
    row(f"--served-model-name 'x\\x85ExecStartPre=...' -> {t}", p, "\x85" in p.stdout)
# 5 leaks
open("leak.sh", "w").write(
    "export LMCACHE_KEY=keysecretDDD\nexport LMCACHE_REMOTE_URL=redis://alice:urlsecretFFF@redis:6379\n"
    "export LMCACHE_REDIS_PASSWD=pwsecretAAA\nexport VLLM_GCS_CREDENTIALS=credsecretCCC\nexport LMCACHE_AUTH_HEADER='Bearer authsecretBBB'\n"
    "vllm serve m --otlp-traces-endpoint https://bob:otlpsecretJJJ@otel:4317 --max-model-len 4096\n")
for t in ("systemd", "docker", "compose", "kubernetes", "env", "yaml"):
    p = run("export", "launch", "leak.sh", "--to", t)
    leaked = sorted({m for m in re.findall(r"[a-z]*secret[A-Z]{3}", p.stdout + p.stderr)})
    rows.append((f"secrets (LMCACHE_KEY, *_PASSWD, *_CREDENTIALS, *_AUTH*, URL userinfo, --otlp user:pass@) -> {t}", p.returncode, ",".join(leaked) or False))
# 6 --api-key sk- / served-model-name yaml / $VLLM_API_KEY
open("k2.sh", "w").write("vllm serve m --api-key sk-abcdefgh1234567890abcdef\n")
open("k3.yaml", "w").write("model: m\nserved-model-name: foo\nmax-model-len: 4096\n")
open("k1.sh", "w").write('vllm serve m --api-key "$VLLM_API_KEY"\n')
for f in ("k2.sh", "k3.yaml", "k1.sh"):
    for t in ("systemd", "kubernetes"):
        p = run("export", "launch", f, "--to", t)
        rows.append((f"ordinary launch {f} -> {t}", p.returncode, "sk-abcdefgh" in p.stdout))
# 7 check --fix --in-place on a Deployment
open("dep.yaml", "w").write("""apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  selector: {matchLabels: {app: vllm}}
  template:
    metadata: {labels: {app: vllm}}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.33.0
        args: ["--model", "/m", "--max-model-len", "1048576", "--max-num-batched-tokens", "1048576"]
""")
p = run("check", "dep.yaml", "--gpu", "A100-80GB", "--model", str(ROOT / "tests/scenarios/s1/model"), "--fix", "--in-place")
after = open("dep.yaml").read()
rows.append(("check dep.yaml --fix --in-place (a Deployment)", p.returncode, "apiVersion" not in after))
# 8 validation
p = run("export", "launch", "--to", "docker", "--", "vllm", "serve", "m", "--gpu-memory-utilization", "1.5")
rows.append(("export --gpu-memory-utilization 1.5", p.returncode, p.returncode == 0))
p = run("export", "alerts", "--vllm-version", "9.9")
rows.append(("export alerts --vllm-version 9.9", p.returncode, p.returncode == 0))
# 9 k8s 240 GiB tier
tier = '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":257698037760}}'
p = run("export", "launch", "--to", "kubernetes", "--vllm-version", "0.33.0", "-o", "d240.yaml", "--", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "32768", "--kv-transfer-config", tier)
c = run("check", "d240.yaml", "--gpu", "H100", "--vllm-version", "0.33.0", "--format", "json")
try:
    f = [(x["rule"], x["severity"]) for x in json.loads(c.stdout)["findings"] if x["rule"] in ("OG401", "OG405") and x["severity"] != "info"]
except Exception:
    f = "check failed: " + c.stderr[-100:]
rows.append(("k8s export of a 240 GiB CPU tier, then check", p.returncode, f or False))
# 10 GPU alert at util 0.95
p = run("export", "alerts", "--gpu", "A100-80GB", "--", "vllm", "serve", "Qwen/Qwen3-8B", "--gpu-memory-utilization", "0.95")
m = re.search(r"DCGM_FI_DEV_FB_FREE\)\) > ([0-9.]+)", p.stdout)
rows.append(("export alerts for a launch at utilization 0.95: GPU-memory threshold", p.returncode, m.group(1) if m else "n/a"))
for r in rows:
    print(json.dumps(r))
