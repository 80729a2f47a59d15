"""Run a whole probe: the chain, then the stages under load while sampling memory.

One asyncio loop drives everything: streaming requests on one pooled httpx
client, and the sampling loop beside them. Every wait has a bound: the chain
by its per-call timeout and the run's duration, each request by
``min(request timeout, time left in the run)``, each stream read by the stall
timeout. A stage with a failed request ends the schedule (later stages would
only repeat the failure, and a dying server should be left alone).
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from oomguard.probe.chain import Chain, ChainOutcome, CheckResult
from oomguard.probe.classes import ProbeClass, Source
from oomguard.probe.client import ClientFailure, ProbeClient, ServerURL, Timeouts, load_transport
from oomguard.probe.prompts import PromptBuilder, make_builder
from oomguard.probe.samplers import MemorySampler, Sample
from oomguard.probe.sampling import SamplerStatus, SamplingLoop
from oomguard.probe.schedule import Bounds, Stage, StageKind, build_schedule
from oomguard.probe.stream import RequestRecord, stream_request


@dataclass
class ProbeConfig:
    url: ServerURL
    api_key: str | None = None
    model: str | None = None
    max_model_len: int | None = None  # the claim; default: what the server serves
    concurrency: int = 8
    output_tokens: int = 16
    prompt_tokens: int | None = None
    waves: int = 1
    find_limit: bool = False
    bounds: Bounds = field(default_factory=Bounds)
    connect_timeout_s: float = 5.0
    chain_timeout_s: float = 30.0
    stall_timeout_s: float = 300.0
    local: bool | None = None  # None: decide from the host name
    server_pid: int | None = None
    transport: Any = None  # an httpx transport, for tests
    http_transport: str = "auto"  # stage 2's: auto | httpx | aiohttp (client.load_transport)
    env: dict[str, str] | None = None
    container: bool | None = None


@dataclass
class StageResult:
    stage: Stage
    records: list[RequestRecord] = field(default_factory=list)
    t_start: float = 0.0
    t_end: float = 0.0
    not_started: int = 0
    note: str | None = None

    @property
    def ok(self) -> int:
        return sum(1 for r in self.records if r.ok)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.records if not r.ok)

    @property
    def complete(self) -> bool:
        return self.not_started == 0 and self.failed == 0 and len(self.records) == self.stage.num_requests

    def to_json(self) -> dict[str, Any]:
        ttfts = sorted(r.ttft_s for r in self.records if r.ttft_s is not None)
        itls = sorted(x for r in self.records for x in r.itl_s)
        wall = max(self.t_end - self.t_start, 1e-9)
        errors: dict[str, int] = {}
        for r in self.records:
            if not r.ok and r.cls:
                errors[r.cls] = errors.get(r.cls, 0) + 1
        usage = [r.usage_prompt_tokens for r in self.records if r.usage_prompt_tokens is not None]
        return {
            **self.stage.to_json(),
            "prompt_tokens_observed": max(usage) if usage else None,
            "requests_ok": self.ok,
            "requests_failed": self.failed,
            "requests_not_started": self.not_started,
            "ttft_p50_s": percentile(ttfts, 50),
            "ttft_p99_s": percentile(ttfts, 99),
            "itl_p50_s": percentile(itls, 50),
            "itl_p99_s": percentile(itls, 99),
            "output_tokens": sum(r.output_tokens for r in self.records),
            "requests_per_s": self.ok / wall,
            "t_start": round(self.t_start, 3),
            "t_end": round(self.t_end, 3),
            "errors": errors,
            "note": self.note,
        }


@dataclass
class ProbeRun:
    """Everything a probe observed; the verdict and the reports are computed from it."""

    config: ProbeConfig
    chain: ChainOutcome
    stages: list[StageResult] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    samplers: dict[str, SamplerStatus] = field(default_factory=dict)
    schedule_notes: list[str] = field(default_factory=list)
    prompt_method: str | None = None
    max_model_len: int | None = None
    server_alive: bool | None = None
    alive_detail: str = ""
    server_pid: int | None = None
    server_pids: set[int] = field(default_factory=set)
    kernel_lines: list[str] = field(default_factory=list)
    kernel_checked: bool = False
    duration_s: float = 0.0
    hit_duration: bool = False
    kv_cache_tokens_served: int | None = None
    cache_config_served: dict | None = None  # probe.metrics.cache_config_values of the last scrape
    http_transport: str = "mock transport"
    tree: Any = field(default=None, repr=False)  # samplers.ProcessTree, for the liveness check
    kernel: Any = field(default=None, repr=False)  # kernel.KernelOomSampler

    @property
    def records(self) -> list[RequestRecord]:
        return [r for s in self.stages for r in s.records]


def percentile(sorted_values: list[float], p: float) -> float | None:
    if not sorted_values:
        return None
    k = (len(sorted_values) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


class Progress:
    """What the CLI's progress bar is told. The default does nothing."""

    def stage(self, stage: Stage, index: int, total: int) -> None: ...

    def request_done(self, record: RequestRecord) -> None: ...

    def message(self, text: str) -> None: ...


def is_local_host(host: str) -> bool:
    """True when ``host`` is this machine (loopback or one of its interface addresses)."""
    if host in ("localhost", "127.0.0.1", "::1", "0.0.0.0", "[::1]"):
        return True
    try:
        addrs = {ai[4][0] for ai in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    if any(a.startswith("127.") or a == "::1" for a in addrs):
        return True
    try:
        import psutil

        local = {a.address for ifaces in psutil.net_if_addrs().values() for a in ifaces}
    except Exception:  # noqa: BLE001
        return False
    return bool(addrs & local)


SamplerFactory = Callable[["ProbeConfig", ChainOutcome, ProbeRun, Callable[[bool], ProbeClient]], list[MemorySampler]]


def default_samplers(
    config: ProbeConfig, chain: ChainOutcome, run: ProbeRun, make_client: Callable[[bool], ProbeClient]
) -> list[MemorySampler]:
    """Every source this host can read; what is missing is noted in ``run.samplers``."""
    from oomguard.probe.kernel import KernelOomSampler
    from oomguard.probe.metrics import MetricsSampler
    from oomguard.probe.samplers import NvidiaSmiSampler, NvmlSampler, ProcessTree, RssSampler, find_server_pid

    samplers: list[MemorySampler] = []

    def note(name: str, source: Source, text: str, active: bool) -> None:
        run.samplers[name] = SamplerStatus(name, source.value, text, active)

    if chain.metrics_ok:
        samplers.append(MetricsSampler(make_client(chain.trust_env)))
        note("metrics", Source.METRICS, f"{config.url.root}/metrics", True)
    else:
        note("metrics", Source.METRICS, "/metrics not available", False)

    local = config.local if config.local is not None else is_local_host(config.url.host)
    if not local:
        why = "server is on another host: run oomguard probe there for GPU, RSS and kernel sampling"
        for name, src in (("gpu", Source.NVML), ("rss", Source.RSS), ("kernel", Source.KERNEL)):
            note(name, src, why, False)
        return samplers

    pid = config.server_pid or find_server_pid(config.url.port)
    tree = None
    if pid:
        try:
            tree = ProcessTree(pid)
        except Exception as exc:  # noqa: BLE001 - psutil.NoSuchProcess / AccessDenied
            note("rss", Source.RSS, f"server pid {pid}: {exc}", False)
    if tree is not None:
        run.server_pid = pid
        samplers.append(RssSampler(tree))
        note("rss", Source.RSS, f"server pid {pid} ({tree.name}) and its children", True)
        run.tree = tree
    elif "rss" not in run.samplers:
        note("rss", Source.RSS, f"no process listens on port {config.url.port} here (try --server-pid)", False)

    pids = tree.pids if tree is not None else None
    gpu, why = NvmlSampler.create(pids)
    if gpu is None:
        smi, why_smi = NvidiaSmiSampler.create()
        if smi is not None:
            samplers.append(smi)
            note("nvidia-smi", Source.NVIDIA_SMI, f"{why_smi} (NVML: {why})", True)
        else:
            note("gpu", Source.NVML, f"no GPU sampler: {why}; {why_smi}", False)
    else:
        samplers.append(gpu)
        note("nvml", Source.NVML, why, True)

    kernel, why_k = KernelOomSampler.create()
    if kernel is not None:
        samplers.append(kernel)
        run.kernel_checked = True
        run.kernel = kernel
    note("kernel", Source.KERNEL, why_k, kernel is not None)
    return samplers


async def probe(
    config: ProbeConfig,
    *,
    progress: Progress | None = None,
    sampler_factory: SamplerFactory = default_samplers,
) -> ProbeRun:
    """The whole probe. Never raises for server behaviour; everything lands in the result."""
    progress = progress or Progress()
    zero = time.perf_counter()
    deadline = zero + config.bounds.duration_s

    def make_client(trust_env: bool, *, read_s: float | None = None, pool: int = 8, transport: Any = None) -> ProbeClient:
        return ProbeClient(
            config.url,
            config.api_key,
            timeouts=Timeouts(
                connect=config.connect_timeout_s,
                read=read_s or config.chain_timeout_s,
                write=config.chain_timeout_s,
                pool=config.bounds.request_timeout_s,
            ),
            transport=transport or config.transport,
            trust_env=trust_env,
            max_connections=pool,
        )

    chain = Chain(
        config.url,
        make_client,
        api_key=config.api_key,
        model=config.model,
        claimed_max_model_len=config.max_model_len,
        env=config.env,
        container=config.container,
        timeout_s=config.chain_timeout_s,
    )
    progress.message("stage 1: client chain")
    try:
        outcome, chain_client = await asyncio.wait_for(chain.run(), timeout=config.bounds.duration_s)
    except asyncio.TimeoutError:
        outcome, chain_client = chain.out, chain.client
        outcome.stopped = True
        outcome.checks.append(
            CheckResult(
                "chain",
                False,
                f"the client chain did not finish within --duration {config.bounds.duration_s:.0f}s",
                cls=ProbeClass.TIMEOUT,
            )
        )
    run = ProbeRun(config=config, chain=outcome)
    try:
        if outcome.blocking:
            return run
        await _stage_two(config, run, chain_client, make_client, zero, deadline, progress, sampler_factory)
        return run
    finally:
        if chain_client is not None:
            await chain_client.aclose()
        run.duration_s = time.perf_counter() - zero


async def _stage_two(
    config: ProbeConfig,
    run: ProbeRun,
    chain_client: ProbeClient,
    make_client: Callable[..., ProbeClient],
    zero: float,
    deadline: float,
    progress: Progress,
    sampler_factory: SamplerFactory,
) -> None:
    outcome = run.chain
    max_len = config.max_model_len or outcome.served_max_model_len
    if not max_len:
        run.schedule_notes.append("no max-model-len claimed and the server did not report one: stage 2 skipped")
        return
    run.max_model_len = max_len
    try:
        stages, notes = build_schedule(
            max_model_len=max_len,
            concurrency=config.concurrency,
            output_tokens=config.output_tokens,
            prompt_tokens=config.prompt_tokens,
            waves=config.waves,
            max_requests=config.bounds.max_requests,
            find_limit=config.find_limit,
        )
    except ValueError as exc:
        run.schedule_notes.append(f"stage 2 skipped: {exc}")
        return
    run.schedule_notes.extend(notes)
    builder = await make_builder(chain_client, outcome.model, outcome.tokenize_ok)
    run.prompt_method = builder.describe()

    pool = max(s.concurrency for s in stages) if stages else 1
    fast = None
    if config.transport is None:
        fast, run.http_transport = load_transport(
            config.http_transport, config.url, trust_env=outcome.trust_env, max_connections=pool + 2
        )
    load = make_client(outcome.trust_env, read_s=config.stall_timeout_s, pool=pool + 2, transport=fast)
    in_flight = [0]
    def metrics_client(trust: bool) -> ProbeClient:
        scrape = None
        if config.transport is None:  # ~50 kB per scrape: the cheaper parser helps here too
            scrape, _ = load_transport(config.http_transport, config.url, trust_env=trust, max_connections=1)
        return make_client(trust, pool=1, transport=scrape)

    samplers = sampler_factory(config, outcome, run, metrics_client)
    loop = SamplingLoop(samplers, config.bounds.sample_interval_s, zero, in_flight=lambda: in_flight[0])
    for name, st in loop.status.items():
        if name in run.samplers:
            loop.status[name] = run.samplers[name]
    loop.start()
    try:
        for i, stage in enumerate(stages):
            if time.perf_counter() >= deadline:
                run.hit_duration = True
                run.schedule_notes.append(f"stage {stage.name} not run: --duration reached")
                run.stages.append(StageResult(stage, not_started=stage.num_requests, note="--duration reached"))
                break
            progress.stage(stage, i, len(stages))
            result = await run_stage(stage, load, builder, outcome.model, zero, deadline, config, in_flight, progress)
            run.stages.append(result)
            if result.not_started:
                run.hit_duration = True
            if not result.complete:
                run.schedule_notes.append(f"stopped after stage {stage.name}: not every request completed")
                break
            if stage.kind is StageKind.FIND_LIMIT:
                # a reading from after the stage, not from its middle, waited for: the decision below reads it
                await loop.tick(settle_s=config.chain_timeout_s)
            if stage.kind is StageKind.FIND_LIMIT and _saturated(loop.samples, result):
                result.note = "KV cache saturated (preemptions or a waiting queue): limit reached"
                run.schedule_notes.append(f"--find-limit: KV pool saturated at concurrency {stage.concurrency}")
                break
    finally:
        await loop.stop()
        await load.aclose()
        run.samples = loop.samples
        run.samplers.update(loop.status)
        kernel = run.kernel
        if kernel is not None:
            run.kernel_lines = list(kernel.lines)
        tree = run.tree
        if tree is not None:
            run.server_pids = tree.pids() | getattr(_rss(samplers), "pids_seen", set())
        for s in samplers:
            last = getattr(s, "last", None)
            if last is not None and getattr(last, "kv_cache_tokens", None):
                from oomguard.probe.metrics import cache_config_values

                run.kv_cache_tokens_served = last.kv_cache_tokens
                run.cache_config_served = cache_config_values(last)
    run.server_alive, run.alive_detail = await _alive(chain_client, run.tree, config)


def _rss(samplers: list[MemorySampler]) -> Any:
    for s in samplers:
        if s.source is Source.RSS:
            return s
    return None


async def run_stage(
    stage: Stage,
    client: ProbeClient,
    builder: PromptBuilder,
    model: str | None,
    zero: float,
    deadline: float,
    config: ProbeConfig,
    in_flight: list[int],
    progress: Progress,
) -> StageResult:
    """One stage: ``num_requests`` streams, at most ``concurrency`` at once, each bounded by the deadline."""
    result = StageResult(stage, t_start=time.perf_counter() - zero)
    gate = asyncio.Semaphore(stage.concurrency)
    # A fresh seed per run: a repeated probe must not hit the prefix cache its predecessor filled.
    base_seed = (zlib.crc32(stage.name.encode()) ^ random.SystemRandom().getrandbits(31)) & 0x7FFFFFFF

    async def one(k: int) -> RequestRecord | None:
        async with gate:
            left = deadline - time.perf_counter()
            if left <= 0:
                return None
            seed = base_seed * 100003 + k
            if stage.prompt_tokens > 50_000:  # a 1M-token prompt takes ~0.3 s to build: off the loop
                prompt = await asyncio.to_thread(builder.build, stage.prompt_tokens, seed)
            else:
                prompt = builder.build(stage.prompt_tokens, seed)
            payload = {
                "model": model,
                "prompt": prompt,
                "max_tokens": stage.max_tokens,
                "temperature": 0,
                "ignore_eos": True,  # vLLM extension: exact output length on a random model too
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            record = RequestRecord(
                id=k,
                stage=stage.name,
                prompt_tokens=stage.prompt_tokens,
                max_tokens=stage.max_tokens,
                t_start=time.perf_counter() - zero,
            )
            in_flight[0] += 1
            try:
                await stream_request(
                    client,
                    "/completions",
                    payload,
                    record,
                    clock_zero=zero,
                    deadline_s=min(config.bounds.request_timeout_s, deadline - time.perf_counter()),
                )
            finally:
                in_flight[0] -= 1
            progress.request_done(record)
            return record

    done = await asyncio.gather(*(one(k) for k in range(stage.num_requests)))
    result.records = [r for r in done if r is not None]
    result.not_started = sum(1 for r in done if r is None)
    result.t_end = time.perf_counter() - zero
    return result


def _saturated(samples: list[Sample], result: StageResult) -> bool:
    """Preemptions rose during the stage, or requests waited while the KV pool was full."""
    metrics = [s for s in samples if s.source is Source.METRICS]
    before = [s for s in metrics if s.t < result.t_start]
    window = [s for s in metrics if s.t >= result.t_start]
    if not window:
        return False
    pre = [s.values["preemptions_total"] for s in before[-1:] + window if "preemptions_total" in s.values]
    if len(pre) >= 2 and pre[-1] > pre[0]:
        return True
    return any(s.values.get("waiting", 0) > 0 and s.values.get("kv_cache_usage", 0) >= 0.99 for s in window)


async def _alive(client: ProbeClient, tree: Any, config: ProbeConfig) -> tuple[bool, str]:
    """Is the server still serving after the load? /health, then the process."""
    proc_note = ""
    if tree is not None and not tree.alive():
        return False, f"server process {tree.pid} is gone"
    if tree is not None:
        proc_note = f"; process {tree.pid} running"
    try:
        status, _ = await client.get("/health", api=False, timeout=min(10.0, config.chain_timeout_s))
    except ClientFailure as exc:
        return False, f"/health after the load: {exc.detail}{proc_note}"
    if status == 200:
        return True, f"/health answered 200 after the load{proc_note}"
    return False, f"/health answered HTTP {status} after the load{proc_note}"
