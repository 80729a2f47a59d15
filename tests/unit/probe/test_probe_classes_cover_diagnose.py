"""probe reports a --server-log verdict in its own class set: it must hold every diagnose class,
or a log's nccl-error would be dropped silently (the list is written out, so this keeps it whole)."""

from oomguard.model.failures import FailureClass
from oomguard.probe.classes import ProbeClass


def test_every_failure_class_is_a_probe_class():
    assert {c.value for c in FailureClass} <= {c.value for c in ProbeClass}
