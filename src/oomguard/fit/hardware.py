"""Choose the hardware: ``fit`` without a GPU searches GPU type × count, and ranks what fits by cost and speed.

For each card (every priced card of the table, or the ``--gpus`` list) and each count of a node
(1, 2, 4, 8), ``fit``'s own search finds the best launch for the goal on that hardware: the same
flags, the same verdict as ``plan``, the same headroom floor. Cards whose weights cannot fit on
eight of them are dropped before any search (``weights per GPU > the card``). With
``--max-nodes N`` and no single node fitting, 2, 4 … N nodes of eight are tried with tensor
parallelism inside a node and pipeline stages across nodes, over the stated interconnect.

Speed comes from fit's roofline (fit/roofline.py, an *estimate, roofline, ±50%*): decode
tokens per second at the goal's concurrency and input length, time to the first token of an
input-length prompt, and the inter-token latency of a step that also carries a prefill chunk.
Across nodes each pipeline boundary adds the activation transfer over the interconnect.

Cost is ``count × usd_per_gpu_hour`` from the price table (fit/prices.py). Three answers:
the cheapest launch that fits, the most tokens per dollar, and the lowest latency (TTFT + ITL).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from oomguard.units import GiB

NODE_COUNTS = (1, 2, 4, 8)
GPUS_PER_NODE = 8
EXTRA_COUNTS = 1  # after the smallest count that fits, how many larger ones are tried (they buy speed)
NODE_HOP_S = 20e-6  # one pipeline boundary's latency across nodes (RDMA / fast Ethernet): an estimate
ACT_BYTES = 2  # a bf16 hidden state crossing a pipeline boundary


@dataclass
class HardwareOption:
    gpu: Any
    count: int
    nodes: int
    price: Any  # fit.prices.Price or None
    candidate: Any  # fit.result.Candidate
    tokens_per_s: float  # decode, at the goal's concurrency
    capacity: int  # requests of the input length the pool holds
    ttft_s: float
    itl_s: float
    interconnect_note: str = ""

    @property
    def cost_per_hour(self) -> float | None:
        return None if self.price is None else round(self.price.usd_per_gpu_hour * self.count, 4)

    @property
    def tokens_per_dollar(self) -> float | None:
        c = self.cost_per_hour
        if c is None:
            return None
        return float("inf") if c == 0 else self.tokens_per_s * 3600 / c

    @property
    def latency_s(self) -> float:
        return self.ttft_s + self.itl_s

    @property
    def headroom_gib(self) -> float:
        return float(self.candidate.summary.get("margin_gib") or 0.0)

    def label(self) -> str:
        return f"{self.count}× {self.gpu.name}" + (f" ({self.nodes} nodes)" if self.nodes > 1 else "")

    def to_dict(self) -> dict:
        tpd = self.tokens_per_dollar
        return {
            "gpu": {"type": self.gpu.name, "count": self.count, "nodes": self.nodes, "total_gib": round(self.gpu.total_bytes / GiB, 2)},
            "cost_per_hour": self.cost_per_hour,
            "price": self.price.to_dict() if self.price is not None else None,
            "tokens_per_s": round(self.tokens_per_s, 1),
            "tokens_per_dollar": None if tpd is None else ("unpriced: owned" if tpd == float("inf") else round(tpd)),
            "capacity_at_input_len": self.capacity,
            "ttft_s": round(self.ttft_s, 3),
            "itl_s": round(self.itl_s, 4),
            "latency_s": round(self.latency_s, 3),
            "headroom_gib": self.headroom_gib,
            "speed_label": "estimate, roofline, ±50%",
            "command": self.candidate.command,
            "flags": self.candidate.to_dict()["flags"],
            "plan": self.candidate.plan.to_dict(),
            **({"interconnect": self.interconnect_note} if self.interconnect_note else {}),
        }


@dataclass
class HardwareResult:
    options: list[HardwareOption]
    searched: list[dict]  # every (gpu, count) considered and what became of it
    goal: dict
    prices: str
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def priced(self) -> list[HardwareOption]:
        return [o for o in self.options if o.cost_per_hour is not None]

    @property
    def cheapest(self) -> HardwareOption | None:
        # at equal cost (owned cards at 0 $/h, or two rows priced alike) the fewer GPUs, then the faster
        return min(self.priced, key=lambda o: (o.cost_per_hour, o.count, -o.tokens_per_s), default=None)

    @property
    def best_tokens_per_dollar(self) -> HardwareOption | None:
        return max(self.priced, key=lambda o: (o.tokens_per_dollar, o.tokens_per_s), default=None)

    @property
    def best_latency(self) -> HardwareOption | None:
        return min(self.options, key=lambda o: (o.latency_s, o.cost_per_hour if o.cost_per_hour is not None else float("inf")), default=None)

    @property
    def found(self) -> bool:
        return bool(self.options)

    def to_dict(self) -> dict:
        idx = {id(o): i for i, o in enumerate(self.options)}

        def pick(o):
            return None if o is None else idx[id(o)]

        return {
            "candidates": [o.to_dict() for o in self.options],
            "cheapest": pick(self.cheapest),
            "best_tokens_per_dollar": pick(self.best_tokens_per_dollar),
            "best_latency": pick(self.best_latency),
            "searched": self.searched,
            "goal": self.goal,
            "prices": self.prices,
            "notes": list(self.notes),
            "elapsed_s": round(self.elapsed_s, 2),
        }


def _weights_fit(model, gpu, count: int) -> bool:
    """A cheap screen: the weights alone, split over ``count`` cards, within the card."""
    from oomguard.model.weights import model_weight_bytes

    return model_weight_bytes(model) / count < gpu.total_bytes * 0.97


def _memory_floor(model, gpu, goal, version, usage, fixed_flags=None) -> tuple[int, int] | None:
    """(whole-model weight bytes, KV bytes the goal needs at its smallest: fp8 where the card stores it), from one plan."""
    from oomguard.errors import OomguardError
    from oomguard.model.planner import plan_launch

    L = goal.context
    if not L:
        return None
    flags = {**(fixed_flags or {}), "max_model_len": L, "kv_cache_dtype": "fp8" if gpu.fp8_kv else "auto", "enforce_eager": True}
    try:
        p = plan_launch(model, gpu, flags, {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}, version=version, num_gpus=1, usage=usage)
    except OomguardError:
        return None
    from oomguard.model.weights import model_weight_bytes

    I = goal.input_len(L)
    per_request = p.one_request_bytes * I / L if L else 0
    return model_weight_bytes(model), int(per_request * max(1, goal.concurrency or 1))


def _could_fit(floor: tuple[int, int] | None, gpu, count: int) -> bool:
    """The goal's weights and KV within ``count`` cards (95 %): a lower bound on what any launch needs."""
    if floor is None:
        return True
    weights, kv = floor
    return weights + kv <= count * gpu.total_bytes * 0.95


def _figures(model, gpu, cand, goal, nodes: int, interconnect_gbps: float | None) -> tuple[float, int, float, float, str]:
    from oomguard.fit.roofline import Roofline

    plan = cand.plan
    s = plan.settings
    rl = Roofline.build(model, gpu, tensor_parallel_size=s.tensor_parallel_size,
                        weights_bytes=sum(r.weights.bytes for r in plan.ranks), kv_bytes_per_token=plan.kv_bytes_per_token,
                        eager=s.enforce_eager)
    L = s.max_model_len
    I = goal.input_len(L)
    C = max(1, goal.concurrency or 1)
    T = s.max_num_batched_tokens
    cap = int(cand.summary.get("capacity_at_input_len") or C)
    tps = rl.decode_tokens_per_s(C, I)
    ttft = rl.prefill_s(I, T)
    itl = rl.mixed_step_s(T, C, I)
    note = ""
    if nodes > 1:
        bw = (interconnect_gbps or 100.0) * 1e9 / 8
        hops = nodes - 1
        per_decode = hops * (C * model.hidden_size * ACT_BYTES / bw + NODE_HOP_S)
        steps = max(1, -(-I // T))
        ttft += steps * hops * (T * model.hidden_size * ACT_BYTES / bw + NODE_HOP_S)
        itl += hops * (T * model.hidden_size * ACT_BYTES / bw + NODE_HOP_S)
        tps = C / (C / tps + per_decode) if tps > 0 else 0.0
        note = (f"{nodes} nodes, pipeline stages across them over {interconnect_gbps or 100:g} Gb/s: "
                f"{hops} boundary transfer(s) per step added (estimate); run the command on every node with "
                f"--nnodes {nodes} --node-rank N --master-addr HEAD where the release has them, else on a Ray cluster of {nodes} nodes")
    return tps, cap, ttft, itl, note


def search(model, goal, *, gpus: list, prices, version: str | None = None, usage: str = "serve", max_nodes: int = 1,
           interconnect_gbps: float | None = None, calibration=None, model_name: str | None = None,
           other_gpu_use_bytes: int = 0, fixed_flags: dict | None = None) -> HardwareResult:
    """Every GPU type × count that fits the goal, with its best launch, cost and speed."""
    from oomguard.fit.goalfix import headroom_floor
    from oomguard.fit.runner import FitRequest, fit
    from oomguard.fit.space import HEADROOM_FLOOR_SHARE

    t0 = time.perf_counter()
    options: list[HardwareOption] = []
    searched: list[dict] = []
    notes: list[str] = []
    for gpu in gpus:
        price = prices.price_of(gpu.name) if prices is not None else None
        counts = [c for c in NODE_COUNTS]
        if max_nodes > 1:
            counts += [GPUS_PER_NODE * n for n in (2, 4, 8, 16) if n <= max_nodes]
        if not _weights_fit(model, gpu, counts[-1]):
            searched.append({"gpu": gpu.name, "count": counts[-1], "result": "weights per GPU exceed the card even at this count"})
            continue
        floor = _memory_floor(model, gpu, goal, version, usage, fixed_flags)
        first_fit = None
        for count in counts:
            if first_fit is not None and counts.index(count) > counts.index(first_fit) + EXTRA_COUNTS:
                break
            nodes = max(1, count // GPUS_PER_NODE) if count > GPUS_PER_NODE else 1
            if nodes > 1 and any(o.nodes == 1 for o in options):
                break  # one node of some card fits: more nodes are not searched
            if not _weights_fit(model, gpu, count):
                searched.append({"gpu": gpu.name, "count": count, "result": "weights per GPU exceed the card"})
                continue
            if not _could_fit(floor, gpu, count):
                need = (floor[0] + floor[1]) / GiB  # type: ignore[index]
                searched.append({"gpu": gpu.name, "count": count,
                                 "result": f"weights + the goal's KV ({need:,.0f} GiB, fp8 where possible) exceed {count} card(s)"})
                continue
            g = goal._replace(margin_bytes=max(goal.margin_bytes, headroom_floor(gpu.total_bytes, HEADROOM_FLOOR_SHARE)))
            req = FitRequest(model=model, gpu=gpu, num_gpus=count, goal=g, version=version, model_name=model_name,
                             usage=usage, top=1, calibration=calibration, other_gpu_use_bytes=other_gpu_use_bytes,
                             max_tensor_parallel=GPUS_PER_NODE if nodes > 1 else None, fixed_flags=fixed_flags)
            res = fit(req, checkpoints=False)
            if not res.candidates:
                why = next(iter(res.rejected), "nothing fits")
                searched.append({"gpu": gpu.name, "count": count, "result": f"does not fit ({why})"})
                continue
            cand = res.candidates[0]
            tps, cap, ttft, itl, inote = _figures(model, gpu, cand, g, nodes, interconnect_gbps)
            options.append(HardwareOption(gpu, count, nodes, price, cand, tps, cap, ttft, itl, inote))
            searched.append({"gpu": gpu.name, "count": count, "result": "fits"})
            if first_fit is None:
                first_fit = count
    if any(p is None for p in (o.price for o in options)):
        notes.append("cards without a price in the table are ranked on speed only (no cost per hour): add them with --prices")
    options.sort(key=lambda o: (o.cost_per_hour is None, o.cost_per_hour or 0.0, -o.tokens_per_s))
    goal_d = {"model": model_name or model.name, "max_model_len": goal.context, "concurrency": goal.concurrency,
              "avg_input_len": goal.avg_input_len, "max_nodes": max_nodes, "interconnect_gbps": interconnect_gbps}
    return HardwareResult(options, searched, goal_d, prices.source if prices is not None else "none", notes, time.perf_counter() - t0)
