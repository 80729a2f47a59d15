"""The rule families, one module each; ``oomguard.check.registry.FAMILY_MODULES`` lists them.

Ids by family: OG0xx ``coverage``, OG1xx ``batching``, OG2xx ``kvcache``, OG3xx ``memory``,
OG4xx ``host``, OG5xx ``length``, OG6xx ``flags``, OG7xx ``parallel``, OG8xx ``features``,
OG9xx ``practice``. Importing this package loads none of them.
"""
