"""Two redactors side by side: what one masks that the other shows, on drawn secret assignments.

Each drawn string is a secret name (a flag, an environment variable, a JSON key, a header) in one of its
spellings, a separator, a random value and text around it. A value the old redactor masked and the new one
shows is a regression (a leak); the reverse is newly masked. The token-shape and prose figures are the
property test's own cases (``tests/property/test_redact_contexts.py``).

    python benchmarks/redact_compare.py --old OTHER_CHECKOUT/src [--n 60000] [--seed 7]
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import random
import string
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["--api-key", "--hf-token", "api_key", "HF_TOKEN", "password", "Authorization", "X-Authorization",
         "Proxy-Authorization", "x-api-key", "X-API-Key", "token", "MY_SECRET", "'api_key'", '"password"',
         "aws_secret_access_key", "Bearer", "bearer", "HTTP_AUTHORIZATION", "secretKey", "cookie",
         "LMCACHE_AUTH_HEADER", "-p", "--password", "auth"]
SEPS = [" ", "=", ": ", ":", " = ", "\t", "='", '="', ": '", ': "', " Bearer ", ": Bearer ", "=Basic ", ": token "]
BEFORE = ["", "x ", "export ", "  ", "(", "{", "[", "- ", "# ", "use ", ",", "_", "a-", '"', "'"]
AFTER = ["", " ", "'", '"', ",", ")", "}", "]", ";", "\n", " and more", "&x=1", "/"]


def _load(src: Path, name: str):  # noqa: ANN202 - a module
    spec = importlib.util.spec_from_file_location(name, src / "oomguard" / "redact.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the src/ directory of the checkout to compare against")
    ap.add_argument("--n", type=int, default=60000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    old, new = _load(Path(args.old), "old_redact"), _load(ROOT / "src", "new_redact")
    rnd = random.Random(args.seed)
    shown = masked = 0
    examples = []
    for _ in range(args.n):
        value = rnd.choice(["", "sk-", "hf_", "Zz"]) + "".join(
            rnd.choice(string.ascii_letters + string.digits) for _ in range(rnd.choice([5, 8, 12, 20, 40])))
        text = rnd.choice(BEFORE) + rnd.choice(NAMES) + rnd.choice(SEPS) + value + rnd.choice(AFTER)
        a, b = old.redact_text(text), new.redact_text(text)
        if value not in a and value in b:
            shown += 1
            examples.append(text)
        elif value in a and value not in b:
            masked += 1
    print(f"drawn {args.n}: masked by the old and shown by this one {shown}, newly masked {masked}")
    for text in examples[:10]:
        print("  shown:", repr(text))

    sys.path.insert(0, str(ROOT / "tests" / "property"))
    from test_redact_contexts import CONTEXTS, GLUES, PROSE, TOKENS, _tell

    cases = [(t, c.format(t=g0 + t + g1)) for t, (g0, g1), c in itertools.product(TOKENS.values(), GLUES, CONTEXTS.values())]
    for label, module in (("old", old), ("this", new)):
        leaked = sum(_tell(t) in module.redact_text(s) for t, s in cases)
        over = sum(module.redact_text(p) != p for p in PROSE)
        print(f"{label}: token shapes planted {len(cases)}, leaked {leaked}; prose sentences masked {over} of {len(PROSE)}")
    return 1 if shown else 0


if __name__ == "__main__":
    sys.exit(main())
