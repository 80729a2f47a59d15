"""Traceback frames in every shape people paste them, reduced to the function name.

- CPython: ``  File "/x/vllm/worker/model_runner.py", line 1024, in load_model``
  (also behind ``[rank0]:``, a Ray or worker prefix, a quote ``>`` or a box ``│``);
- IPython / Jupyter: ``File /x/vllm/worker/model_runner.py:1024, in GPUModelRunner.load_model(self)``
  and the older ``/x/model_runner.py in load_model(self)``;
- rich: ``│ /x/vllm/worker/model_runner.py:1024 in load_model``;
- faulthandler / py-spy style: ``File "/x.py", line 12 in load_model`` (no comma) and
  ``load_model (vllm/worker/model_runner.py:1024)``;
- hand-trimmed trees where only ``model_runner.py, line 1024, in load_model`` is left.
"""

from __future__ import annotations

import re
import oomguard.lazy_re as lazy_re

_CPYTHON = lazy_re.compile(r'^[\s>|│┃]*File "([^"]{1,500})", line (\d{1,9}),? in ([\w.<>]{1,120})')
_IPYTHON = lazy_re.compile(r"^[\s>|│┃]*File ([^\s,]{1,500}\.py):(\d{1,9}),? in ([\w.<>]{1,120})")
_IPYTHON_OLD = lazy_re.compile(r"^[\s>|│┃]*(/[^\s]{1,500}\.py) in ([\w.<>]{1,120})\(")
_RICH = lazy_re.compile(r"^[\s>|│┃]*(?:[^\s│]{0,500}/)?[\w.-]{1,100}\.py:(\d{1,9}) in ([\w.<>]{1,120})\s*(?:│|$)")
_PYSPY = lazy_re.compile(r"^[\s>|│┃]*([\w<>]{1,120}) \(([^\s()]{1,500}\.py):\d{1,9}\)\s*$")
_TRIMMED = lazy_re.compile(r'^[\s>|│┃.]*"?[^\s"]{0,500}\.py"?,? line \d{1,9},? in ([\w.<>]{1,120})\s*$')


def frame_function(message: str) -> str | None:
    """The function of a traceback frame line, or None when ``message`` is not one."""
    if ".py" not in message:
        return None
    for rx, group in ((_CPYTHON, 3), (_IPYTHON, 3), (_IPYTHON_OLD, 2), (_RICH, 2), (_PYSPY, 1), (_TRIMMED, 1)):
        m = rx.match(message)
        if m:
            name = m.group(group)
            # "GPUModelRunner.load_model" (IPython qualifies methods): the method is what matters.
            return name.rsplit(".", 1)[-1]
    return None


# Lines that carry a frame but no keyword of the prefilter's first list (added there).
KEYWORDS: tuple[bytes, ...] = (b"File /", b".py in ", b" in load_model", b" in profile_run", b"capture_model",
                               b"_dummy_sampler_run", b" in execute_model", b"load_weights")

