"""One width rule for every command's text output.

On a terminal: its width (never below ``MIN_WIDTH``, so tables keep their columns). Piped or
redirected: ``COLUMNS`` when set, else ``PIPE_WIDTH``, the same for every command, so a saved
report reads the same whichever command wrote it. Long commands and JSON values are never
broken (the renderers keep them on one line).
"""

from __future__ import annotations

import os
import shutil
import sys

MIN_WIDTH = 100
PIPE_WIDTH = 120


def output_width(stream=None) -> int:
    stream = stream or sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) > 0:
        return max(MIN_WIDTH, int(cols))
    if tty:
        return max(MIN_WIDTH, shutil.get_terminal_size((PIPE_WIDTH, 40)).columns)
    return PIPE_WIDTH
