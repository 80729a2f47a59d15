"""Pieces of vLLM's own error messages, without their numbers: a line cut short, a quote in an issue
title, a one-line summary ("... KV cache is needed, which is larger than the available KV cache memory").

The words are vLLM's (v1/core/kv_cache_utils.py, v1/worker/utils.py, config/compilation.py, ...), so the
class is as sure as the full message; the numbers are missing, so the fix says what to read from the full
log. Only error records and unprefixed text count: INFO / WARNING lines never report these failures.
Keywords for the prefilter are in ``KEYWORDS`` (re-exported through parsers/cues.py).
"""

from __future__ import annotations

import re

from oomguard.diagnose.events import LogLine, Signal
from oomguard.diagnose.facts import Collector
import oomguard.lazy_re as lazy_re  # parsers' patterns compile when first run (diagnose's start-up)

_FRAGMENTS: tuple[tuple[Signal, re.Pattern[str]], ...] = tuple((s, lazy_re.compile(p, re.IGNORECASE)) for s, p in (
    (Signal.KV_TOO_SMALL, r"cache is needed,? which is larger than the available KV cache|larger than the available "
                          r"KV cache memory|Based on the available memory, the estimated maximum model length|"
                          r"to serve at least one request with the models?'s max seq len"),
    (Signal.NO_KV_MEMORY, r"No available memory for the cache blocks|not enough GPU memory available to serve even a "
                          r"single token|Cannot auto-fit max_model_len"),
    (Signal.STARTUP_FREE_MEMORY, r"on startup is less than desired GPU memory utili[sz]ation|is less than desired GPU "
                                 r"memory utili[sz]ation|reduce GPU memory used by other processes"),
    (Signal.MAMBA_LIMIT, r"exceeds available Mamba cache blocks|requires one Mamba cache block"),
    (Signal.MAX_LEN_EXCEEDS, r"is greater than the derived max_model_len"),
    (Signal.SAMPLER_WARMUP_OOM, r"occurred when warming up (?:the )?(?:sampler|pooler)"),
    # V0's scheduler (core/scheduler.py _preempt_by_swap): the KV cache is full while serving, the sequences it
    # preempts by swapping do not fit the CPU swap space either
    (Signal.SWAP_EXHAUSTED, r"Aborted due to the lack of CPU swap space"),
))
SCAN = tuple(rx for _, rx in _FRAGMENTS)  # for diagnose's byte scan (parsers/scanset.py)
KEYWORDS: tuple[bytes, ...] = (b"larger than the available", b"Based on the available memory", b"to serve at least one",
                               b"No available memory", b"single token", b"Cannot auto-fit", b"less than desired",
                               b"used by other processes", b"Mamba cache block", b"derived max_model_len",
                               b"warming up", b"lack of CPU swap space")


def parse_fragment(line: LogLine, col: Collector, msg: str) -> bool:
    if line.kernel or line.level in ("INFO", "DEBUG", "WARNING"):
        return False
    for signal, rx in _FRAGMENTS:
        if rx.search(msg):
            col.signal(signal, line, numbers={"fragment": True})
            return True
    return False
