"""diagnose's and bundle's names for the one redactor (:mod:`oomguard.redact`)."""

from __future__ import annotations

from oomguard.redact import MASK, redact_data as redact_obj, redact_text as redact

__all__ = ["MASK", "redact", "redact_obj"]
