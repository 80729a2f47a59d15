"""oomguard: keep vLLM deployments from running out of memory.

The public API is deliberately small; heavy modules are imported lazily so that
``import oomguard`` and ``oomguard --help`` stay fast.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["OomguardError", "__version__", "plan_launch"]


def __getattr__(name: str):
    # Lazy re-exports: importing the memory model costs nothing until used.
    if name == "OomguardError":
        from oomguard.errors import OomguardError

        return OomguardError
    if name == "plan_launch":
        from oomguard.model.planner import plan_launch

        return plan_launch
    raise AttributeError(name)
