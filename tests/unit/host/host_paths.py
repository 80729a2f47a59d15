"""Paths of the committed host fixtures (imported by the host tests)."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "host"
ROOTS = FIXTURES / "roots"
TOPO = FIXTURES / "topo"
GPUS = FIXTURES / "gpus"
