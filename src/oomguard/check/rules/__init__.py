"""The rule families; importing this package registers every rule.

One module per family, ids by family: OG0xx ``coverage``, OG1xx ``batching``, OG2xx ``kvcache``,
OG3xx ``memory``, OG4xx ``host``, OG5xx ``length``, OG6xx ``flags``,
OG7xx ``parallel``, OG8xx ``features``, OG9xx ``practice``.
"""

from __future__ import annotations

from oomguard.check.rules import (  # noqa: F401
    batching,
    coverage,
    features,
    flags,
    host,
    kvcache,
    length,
    memory,
    parallel,
    practice,
)
