"""Build-time extraction of vLLM's CLI flags and environment variables from its source.

Used only by ``scripts/gen_flag_tables.py``; nothing at run time imports this
package. vLLM is never imported: its sources (from the release wheel) are read
with :mod:`ast` and the argument-building code is *evaluated symbolically* by a
small interpreter (:mod:`.evaluator`) that understands the subset of Python
vLLM's ``add_cli_args`` / ``get_kwargs`` / config dataclasses use. Anything it
cannot evaluate becomes an opaque value and is recorded as such (``default:
null`` with a ``default_repr``), never guessed.

Pieces:
- :mod:`.source`    — the unpacked source tree, module globals, value types;
- :mod:`.evaluator` — expression/statement interpreter over that tree;
- :mod:`.runtime`, :mod:`.classmodel`, :mod:`.calls`, :mod:`.statements` — its parts;
- :mod:`.kwargs`    — vLLM's ``get_kwargs`` rules (config dataclass field -> argparse kwargs);
- :mod:`.argspec`   — the argparse stand-in that turns ``add_argument`` calls into flag records;
- :mod:`.envvars`   — ``vllm/envs.py`` variables and their defaults;
- :mod:`.fetch`     — ``pip download`` + extraction of the ``.py`` files;
- :mod:`.release`   — puts it together into one table (a JSON-able dict).
"""

from __future__ import annotations
