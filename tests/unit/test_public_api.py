"""The public API is small, sorted and lazy: ``import oomguard`` pulls in nothing heavy."""

import subprocess
import sys


def test_all_is_sorted_and_resolves():
    import oomguard

    assert list(oomguard.__all__) == sorted(oomguard.__all__)
    for name in oomguard.__all__:
        assert getattr(oomguard, name) is not None


def test_import_and_help_are_light():
    code = (
        "import sys, oomguard, oomguard.cli.main as m\n"
        "m.build_parser()\n"
        "heavy = [x for x in ('rich', 'httpx', 'yaml', 'psutil', 'prometheus_client', 're2') if x in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
