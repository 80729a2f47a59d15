"""Every field of the new families' configs made hostile in turn, through `oomguard plan` in this process.

The registry sweep's class-default configs (tests/data/oracle/sweep_vllm-0.32.0.json) of Falcon(-H1, -Mamba),
Zamba2, Whisper, ModernBERT, CLIP, SigLIP, Gemma-3n, GLM (4, 4-MoE, -Lite, DSA, 5), Kimi, ERNIE and mllama-like
families: each field (nested ones too) removed or set to each of 17 hostile values, lists shortened, lengthened,
repeated 1000x, typed wrong; extra cross_attention_layers / layer_types / intermediate_size / sub-config shapes.
About 29,000 runs, ~5 minutes. Judged as the fuzz campaigns judge (OOMGUARD_DEBUG=1: a caught crash is a
traceback here), at 10 s a run; exit 3 ("cannot model this architecture") is counted apart, not as a problem.

    python benchmarks/fuzz_config_sweep.py [SEED] [ID,ID...]

Prints each distinct problem once (its innermost oomguard frame) and the totals.
"""
import collections
import json
import random
import resource
import sys
import tempfile
from pathlib import Path
from pathlib import Path as _P

sys.path.insert(0, str(_P(__file__).resolve().parents[1]))
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
from tests.property import fuzzlib

KEYS = ['falcon','zamba','whisper','modernbert','clip','siglip','mllama','gemma3n','glm','kimi','ernie']
d = json.loads((_P(__file__).resolve().parents[1] / 'tests/data/oracle/sweep_vllm-0.32.0.json').read_text())
base = [(c['id'], c['config']) for c in d['cases'] if any(k in c['architecture'].lower() for k in KEYS)]
if len(sys.argv) > 2: base = [b for b in base if any(s in b[0] for s in sys.argv[2].split(','))]
VALS = [0, -1, 1.5, 10**30, 1 << 70, float('nan'), float('inf'), None, "x", "12", [], {}, True, [1], [[1]], 1e308, -10**6]
rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 6161)

def mutations(cfg):
    """(path, value) pairs; path is a tuple of keys; value MISSING deletes."""
    out = []
    def walk(obj, path):
        for k, v in list(obj.items()):
            p = path + (k,)
            if isinstance(v, dict):
                out.append((p, "MISSING")); out.extend((p, x) for x in ("x", [], 3, [v]))
                walk(v, p)
            else:
                out.append((p, "MISSING"))
                for x in VALS: out.append((p, x))
                if isinstance(v, list) and v:
                    out.extend([(p, v[:-1]), (p, v + v[-1:]), (p, v[:1] * 1000), (p, [str(e) + "?" for e in v]),
                            (p, [-1] + v[1:]), (p, [10**6] + v[1:]), (p, [None] * len(v))])
                if isinstance(v, int) and not isinstance(v, bool):
                    out.extend([(p, v * 10**4), (p, -v), (p, float(v) + 0.5)])
    walk(cfg, ())
    for extra in ("cross_attention_layers", "layer_types", "intermediate_size", "text_config", "vision_config"):
        out += [((extra,), x) for x in ([-1, 3], [0, 10**6], "x", [1.5], [[1]], {}, [], 5)]
    nl = cfg.get("num_hidden_layers") or (cfg.get("text_config") or {}).get("num_hidden_layers") or 4
    if isinstance(nl, int):
        out += [(("layer_types",), ["full_attention"] * (nl + 3)), (("layer_types",), ["full_attention"]),
                (("intermediate_size",), [1024] * (nl + 2)), (("intermediate_size",), [1024]),
                (("intermediate_size",), [1024, "x"] + [1024] * (nl - 2))]
    return out

def apply(cfg, path, val):
    cfg = json.loads(json.dumps(cfg))
    o = cfg
    for k in path[:-1]:
        o = o[k]
    if val == "MISSING": o.pop(path[-1], None)
    else: o[path[-1]] = val
    return cfg

stats = collections.Counter(); seen = {}
tmp = Path(tempfile.mkdtemp())
for name, cfg in base:
    for path, val in mutations(cfg):
        c = apply(cfg, path, val)
        (tmp / "model").mkdir(exist_ok=True)
        (tmp / "model" / "config.json").write_text(json.dumps(c, allow_nan=True))
        argv = ["plan", "--model", str(tmp / "model"), "--gpu", "H100", "--format", "json"]
        o = fuzzlib.judge(fuzzlib.run_inprocess(argv, {**fuzzlib.OFFLINE_ENV, "OOMGUARD_DEBUG": "1"}, time_limit_s=10))
        stats["runs"] += 1
        first = (o.err.strip().splitlines() or [""])[-1][:160]
        if o.code == 3 and "internal error" not in o.err: stats["exit3"] += 1
        if o.problems or o.code == 3:
            key = (o.problems[0][:100] if o.problems else "exit3 " + first[:100])
            if o.traceback:
                fr = [l.strip() for l in o.traceback.splitlines() if l.strip().startswith("File") and "oomguard" in l]
                key = "TB " + o.traceback.strip().splitlines()[-1][:80] + " @ " + (fr[-1][-90:] if fr else "")
            for prob in o.problems: stats[prob.split(":")[0]] += 1
            stats["bad"] += 1
            if key not in seen:
                seen[key] = (name, path, repr(val)[:80], first)
                print("FIND", key, "|", name, path, repr(val)[:60], "|", first, flush=True)
print(dict(stats)); print(len(seen), "distinct")
