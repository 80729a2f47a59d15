"""The plan command's presentation: the per-GPU ledger as text (JSON is ``Plan.to_dict``).

Like every command, plan renders in its own folder (check/text.py, fit/render.py, host/render.py,
...); its arithmetic lives in ``oomguard.model``.
"""
