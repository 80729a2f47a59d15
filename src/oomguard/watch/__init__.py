"""``oomguard watch``: keep a verified launch healthy while it serves traffic.

The monitor (``monitor.py``) polls the probe's samplers on a timer, feeds
bounded timelines (``timeline.py``), runs the alert state machine with hold
times (``alerts.py``), compares live usage with the plan (``drift.py``), and
ends with a summary of peaks and the step pattern of memory (``steps.py``,
``summary.py``). ``view.py`` draws it: a live rich table on a terminal,
plain lines otherwise.
"""
