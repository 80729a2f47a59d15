"""The YAML the exports write: PyYAML's safe emitter over a data structure, never text pasted together.

A string is a scalar the emitter quotes as YAML needs (``---``, ``...``, ``: ``,
``#``, leading ``-``/``*``/``&``/``!``, ``yes``/``no``, numbers-as-text), and a
string holding a character YAML could take for a line break or cannot print
(U+0085, U+2028, U+2029, C0/C1 controls) is written double-quoted, where
PyYAML escapes it (``\\n``, ``\\N``, ``\\L``, ``\\x1b``). No aliases
(``&id001``): a shared mapping is written twice. The read-back
(``readback.py``) loads the text with ``yaml.safe_load_all`` and compares the
documents with the ones dumped here.
"""

from __future__ import annotations

from typing import Any

from oomguard.export.fields import CONTROL


def dump(data: Any) -> str:
    """One YAML document for ``data`` (mappings keep their order)."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

        def write_double_quoted(self, text: str, split: bool = True) -> None:
            # PyYAML writes what it deems printable raw when allow_unicode is on, the bidi overrides
            # (U+202E) included; a string with any control character gets every non-ASCII escaped
            if CONTROL.search(text):
                saved, self.allow_unicode = self.allow_unicode, False
                try:
                    super().write_double_quoted(text, split)
                finally:
                    self.allow_unicode = saved
            else:
                super().write_double_quoted(text, split)

    def _str(dumper: yaml.SafeDumper, value: str) -> Any:
        odd = CONTROL.search(value) is not None or any(not c.isprintable() and c != " " for c in value)
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"' if odd else None)

    _Dumper.add_representer(str, _str)
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=100000, allow_unicode=True,
                     default_flow_style=False, explicit_start=False)


def dump_all(docs: list[Any]) -> str:
    """Several documents separated by ``---``."""
    return "---\n".join(dump(d) for d in docs)
