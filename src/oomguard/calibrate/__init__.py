"""``oomguard calibrate``: the plan measured against a fleet's own start-up logs (docs/calibrate.md).

sources (inputs, log-store exports) -> startups (cut streams, diagnose's parsers) -> match (model, GPU,
release, plan) -> offsets (per record, per group) -> profile (the YAML plan/check/fit --calibration read).
"""
