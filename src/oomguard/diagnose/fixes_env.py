"""Fix builders for environment failures: a missing module, a chat template, NCCL, Ray placement."""

from __future__ import annotations

from typing import Any

from oomguard.diagnose.context import Context
from oomguard.diagnose.events import Fix, Verdict
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.parsers.cues import cue_name
from oomguard.diagnose.remedy import num_of

# Modules vLLM imports for one feature, and what provides them (pip names differ from module names).
_PROVIDES = {"flash_attn": "flash-attn", "flashinfer": "flashinfer-python", "librosa": "vllm[audio]",
             "soundfile": "vllm[audio]", "av": "av", "decord": "decord", "timm": "timm", "einops": "einops",
             "bitsandbytes": "bitsandbytes>=0.45", "gguf": "gguf", "modelscope": "modelscope",
             "tensorizer": "vllm[tensorizer]", "runai_model_streamer": "vllm[runai]", "fastsafetensors": "fastsafetensors",
             "ray": "ray[cgraph]", "mistral_common": "mistral_common[opencv]", "qwen_vl_utils": "qwen-vl-utils"}


def _missing_dependency(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    extra, module = num_of(members, "extra"), num_of(members, "module")
    library, package, pip = num_of(members, "library"), num_of(members, "package"), num_of(members, "pip")
    if num_of(members, "driver"):
        v.summary = ("The NVIDIA driver is older than the CUDA the installed torch / vLLM wheels were built for: the "
                     "wrong build is installed for this machine.")
        v.fix.append(Fix("pip", "install the torch / vLLM build for the CUDA version the driver supports "
                         "(nvidia-smi shows it), or upgrade the NVIDIA driver", "the driver's CUDA must be at least "
                         "the wheel's"))
        return
    if num_of(members, "mismatch") and not num_of(members, "name"):
        lib = f" ({library})" if library else ""
        v.summary = (f"A compiled extension{lib} was built against another torch (undefined symbol): the installed "
                     "packages do not match each other.")
        v.fix.append(Fix("pip", f"install --force-reinstall vllm=={ctx.version}" if ctx.version else
                         "install --force-reinstall vllm", "reinstall vLLM with its pinned torch; rebuild flash-attn "
                         "and other extensions against that torch"))
        return
    if num_of(members, "mismatch"):
        v.summary = (f"A broken install: '{num_of(members, 'name')}' cannot be imported from '{module}' (the installed "
                     "package does not match what this vLLM was built against).")
        v.fix.append(Fix("pip", f"install --force-reinstall vllm=={ctx.version}" if ctx.version else
                         "install --force-reinstall vllm", "reinstall vLLM with its pinned dependencies"))
        return
    if num_of(members, "upgrade"):
        v.summary = (f"The installed {package} is too old for this model (it does not know its architecture); "
                     "vLLM stopped reading the config.")
        v.fix.append(Fix("pip", f"install -U {package}", "a release that knows the model type (check the model card)"))
        return
    if library:
        v.summary = f"A shared library is missing: {library} (a CUDA / driver runtime the wheel expects)."
        v.fix.append(Fix("pip", "install a vLLM wheel built for this machine's CUDA (or the matching CUDA runtime)",
                         f"{library} comes from the CUDA toolkit or driver, not from pip's vllm"))
        return
    what = extra or pip or (_PROVIDES.get(str(module).split(".")[0]) if module else None) or package or module
    name = extra or module or package or "a dependency"
    v.summary = (f"vLLM needs {name}, which is not installed in this environment; the server stopped at the import."
                 if what else "A Python import failed at start-up.")
    if what:
        v.fix.append(Fix("pip", f"install {what}", "installs the missing module into the environment vLLM runs in"))


def _chat_template(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    detail = str(num_of(members, "detail") or "")
    v.summary = ("Requests fail in the chat template; the server itself is healthy (fix the template or the requests, "
                 f"not the memory settings): {detail.strip()[:160]}")
    low = detail.lower()
    if "roles must alternate" in low or "undefined" in low or "no attribute" in low:
        v.fix.append(Fix("request", "messages alternating user/assistant, content as the template expects",
                         "the model's template rejects these messages"))
    v.fix.append(Fix("--chat-template", "<path to a Jinja template for this model>",
                     "the tokenizer has no usable chat template (base models have none)"))


_SIGBUS, _SHM_WORDS = cue_name("host:sigbus"), cue_name("words:shm")


def _nccl(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    causes = [m.event.numbers.get("cause") for m in members if m.event.numbers.get("cause")]
    cause = causes[0] if causes else None
    if cause is None and (_SIGBUS in col.cues or _SHM_WORDS in col.cues):
        cause = "shm"  # a worker dead of SIGBUS, or /dev/shm named: the container's shared memory
    shm = num_of(members, "shm_bytes")
    if cause == "shm":
        size = f" (a {shm / 2**20:.0f} MiB segment)" if shm else ""
        v.summary = (f"NCCL could not create its shared-memory segment in /dev/shm{size}: the container's /dev/shm is "
                     "too small (Docker gives 64 MiB by default).")
        v.fix.append(Fix("docker", "--ipc=host (or --shm-size=16g)", "gives the tensor-parallel workers room in /dev/shm"))
        v.fix.append(Fix("NCCL_SHM_DISABLE", 1, "environment variable: fall back to other transports (slower)"))
    elif cause == "p2p":
        v.summary = "NCCL failed on GPU peer-to-peer access (no P2P between these GPUs, or it is broken: IOMMU/ACS, VMs)."
        v.fix.append(Fix("NCCL_P2P_DISABLE", 1, "environment variable: route through host memory instead of P2P"))
        v.fix.append(Fix("--disable-custom-all-reduce", True, "vLLM's custom all-reduce also needs P2P"))
    elif cause == "network":
        v.summary = "NCCL could not connect the ranks over the network (interface, firewall or InfiniBand set-up)."
        v.fix.append(Fix("NCCL_SOCKET_IFNAME", "<the interface the nodes share, e.g. eth0>", "environment variable"))
        v.fix.append(Fix("NCCL_DEBUG", "INFO", "environment variable: NCCL names the failing transport"))
    elif cause == "timeout":
        v.summary = ("An NCCL collective timed out: one rank stopped (crashed, OOM, or stuck) while the others waited; "
                     "the first error of another rank is the cause.")
        v.fix.append(Fix("NCCL_DEBUG", "INFO", "environment variable: shows which rank stopped"))
        v.fix[:] = _with_hang_fixes(v.fix, col)
    else:
        v.summary = "An NCCL collective failed; the log does not say why."
        v.fix.append(Fix("NCCL_DEBUG", "INFO", "environment variable: NCCL prints the host cause (shm, P2P, network)"))
        v.fix[:] = _with_hang_fixes(v.fix, col)


_CAPTURE_WORDS = cue_name("words:capture")


def _hang_fixes(col: Collector) -> list[Fix]:
    """The two launch changes vLLM's troubleshooting guide gives for collectives that hang or time out between
    tensor-parallel ranks with no host cause named: collectives captured in a CUDA graph (the report speaks of graphs
    or capture: eager mode first), and vLLM's custom all-reduce kernel, which needs P2P / CUDA IPC between the GPUs
    (NCCL's own all-reduce then). The ranker (fixes_rank) weighs them against NCCL_DEBUG, a diagnostic step."""
    eager = Fix("--enforce-eager", True, "collectives captured in a CUDA graph can hang where eager ones run "
                "(the report speaks of CUDA graphs)" if _CAPTURE_WORDS in col.cues else
                "rules collectives captured in CUDA graphs in or out as the cause of the hang")
    custom = Fix("--disable-custom-all-reduce", True, "vLLM's custom all-reduce needs P2P / CUDA IPC between the "
                 "GPUs; NCCL's all-reduce works without it")
    return [eager, custom] if _CAPTURE_WORDS in col.cues else [custom, eager]


def _with_hang_fixes(fixes: list[Fix], col: Collector) -> list[Fix]:
    """The class's fixes with the hang fixes after them; eager mode first of all when the report ties the hang to
    CUDA graphs (a fact of this report: the builder's first fix stays first, fixes.rank_fixes)."""
    hang = _hang_fixes(col)
    if _CAPTURE_WORDS in col.cues:
        return hang[:1] + fixes + hang[1:]
    return fixes + hang


def _ray(v: Verdict, members: list[Any], col: Collector, ctx: Context) -> None:
    requested, available = num_of(members, "requested_gpus"), num_of(members, "available_gpus")
    if available is None:
        available = col.ray_gpus  # `ray status` pasted anywhere in the inputs
    timeout = num_of(members, "timeout_s")
    wait = f" within {timeout} s" if timeout else ""
    if requested and available is not None:
        v.summary = f"Ray could not place the {requested} GPUs the launch asks for{wait}: the cluster offers {available}."
    elif requested:
        v.summary = f"Ray could not place the {requested} GPUs the launch asks for{wait} (see `ray status`)."
    else:
        v.summary = "Ray could not place the GPUs the launch asks for (see `ray status`)."
    # The TP size that ran; when the log does not print it, the GPUs the placement asked for stand for it.
    tp = ctx.tensor_parallel_size if ctx.arg("tensor_parallel_size") else int(requested or 1)
    pp = ctx.arg("pipeline_parallel_size") or 1
    if available:
        if tp > available:
            v.fix.append(Fix("--tensor-parallel-size", int(available), "no more GPUs than Ray can place"))
        elif isinstance(pp, int) and tp * pp > available:
            v.fix.append(Fix("--pipeline-parallel-size", max(1, int(available) // tp), "no more GPUs than Ray can place"))
    v.fix.append(Fix("ray", "start the missing nodes / check `ray status` and VLLM_HOST_IP on every node",
                     "each placement bundle needs one free GPU"))
