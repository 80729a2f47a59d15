#!/usr/bin/env python3
"""Generate docs/rules.md from the check rule registry.

    python scripts/gen_rules_doc.py            # write docs/rules.md
    python scripts/gen_rules_doc.py --check    # exit 1 when docs/rules.md is stale

tests/unit/check/test_docs.py runs the same comparison.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from oomguard.check.docs import render_rules_md  # noqa: E402

TARGET = REPO / "docs" / "rules.md"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args()
    text = render_rules_md()
    if args.check:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET.relative_to(REPO)} is stale: run python scripts/gen_rules_doc.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    print(f"wrote {TARGET.relative_to(REPO)} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
