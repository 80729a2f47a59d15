"""The check package's imports form a tree: the context never loads the registry or the rules."""

from __future__ import annotations

import subprocess
import sys


def _loaded_after(module: str) -> set[str]:
    code = f"import sys, {module}; print(' '.join(m for m in sys.modules if m.startswith('oomguard.check')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_context_does_not_import_the_registry_or_the_rules():
    loaded = _loaded_after("oomguard.check.context")
    assert "oomguard.check.registry" not in loaded
    assert not any(m.startswith("oomguard.check.rules") for m in loaded)


def test_registry_loads_the_rules_only_when_asked():
    loaded = _loaded_after("oomguard.check.registry")
    assert "oomguard.check.context" not in loaded
    assert not any(m.startswith("oomguard.check.rules") for m in loaded)
