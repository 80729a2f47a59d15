"""What a check rule needs to run (its own module, so the context and the registry do not import each other).

The import graph of ``oomguard.check`` is a tree: ``finding`` and ``needs`` at the
bottom, ``context`` (what rules look at) and ``registry`` (how rules are declared)
above them, the rule families above both. Only ``registry.all_rules`` reaches up,
lazily, to load the families.
"""

from __future__ import annotations

import enum


class Needs(str, enum.Enum):
    """What a rule needs to run; rules whose needs are missing are skipped (and listed, OG001)."""

    MODEL = "model"  # a model config
    GPU = "gpu"  # a GPU (name or total memory)
    PLAN = "plan"  # both: the memory plan of the launch
    TOPOLOGY = "topology"  # nvidia-smi topo -m output
