"""Error lines: exceptions, argparse errors, engine death, and the numbers inside them.

Each recognised message becomes a ``Signal`` with the numbers it carries
(requested vs free GiB, max_model_len vs KV tokens, the estimated maximum
model length, the unrecognised flags...). Wrapped messages (a pasted log cut
at 80 columns) are matched on the line joined with the next lines.
Tracebacks are tracked so an exception carries the functions it passed
through, which tells the classifier the start-up phase.
"""

from __future__ import annotations

import re

from oomguard.diagnose.events import EXCEPTION_NAME, LogLine, Signal
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.parsers.environment import parse_environment
from oomguard.diagnose.parsers.fragments import parse_fragment
from oomguard.diagnose.parsers.frames import PYTHON_MESSAGE, component, frame
from oomguard.diagnose.parsers.numbers import BadNumber, integer, num, to_gib
from oomguard.diagnose.parsers.paraphrase import note_paste_words, parse_paraphrase
from oomguard.diagnose.parsers.prose import looks_like_words, phase_hints
import oomguard.lazy_re as lazy_re

# Lines that echo what a client sent (parsers.feed skips them) (prompts can say anything, "CUDA out of memory" included).
REQUEST_ECHO = lazy_re.compile(r"^(?:Received request|Added request|Finished request)\b|\bprompt: '|prompt_token_ids: \[")
# vLLM's own advice ("If you are running out of memory, consider ...", "This may cause OOM errors during the initial
# memory profiling phase"): INFO and WARNING lines that mention OOM without reporting one.
_ADVICE = lazy_re.compile(
    r"\b(?:if you (?:are|run|encounter|see|hit|get)|to (?:avoid|prevent|reduce the risk of)|may (?:cause|lead to|result in)|"
    r"might (?:cause|lead to)|can (?:cause|lead to)|could (?:cause|lead to)|risk of|in case of|prone to|consider)\b"
    r"[^.]{0,80}?(?:\bOOMs?\b|out of memory|out-of-memory)"
    r"|(?:\bOOMs?\b|out of memory|out-of-memory)[^.]{0,40}?\b(?:may|might|can|could) (?:occur|happen)",
    re.IGNORECASE)
_CJK = lazy_re.compile(r"[\u3400-\u9fff]")
_OOM_WORD = lazy_re.compile(r"(?<![A-Za-z])OOM(?:s|ed|ing)?(?![A-Za-z])")
_HOST_KILL_WORDS = lazy_re.compile(
    r"oom[\s_-]?kill|killed by (?:the )?(?:kernel|oom|linux|os|system|cgroup)|kernel killed|\bOOMKilled\b|"
    r"exit(?:ed)? (?:with )?(?:code |status )?137\b", re.IGNORECASE)
_METHOD = lazy_re.compile(r"Error executing method '?(\w+)'?")
_EXCEPTION = lazy_re.compile(EXCEPTION_NAME + r"(?::\s*(.*))?$")

# PyTorch's OOM, new (>= 2.1) and old wording.
_OOM_NEW = lazy_re.compile(
    r"Tried to allocate ([\d.]+) (GiB|MiB|KiB|B)\b.*?(?:GPU|NPU|XPU) (\d+) has a total capac(?:i)?ty of ([\d.]+) (GiB|MiB) "
    r"of which ([\d.]+) (GiB|MiB|KiB|bytes|B) is free"
)
_OOM_IN_USE = lazy_re.compile(r"this process has ([\d.]+) (GiB|MiB) memory in use")
_OOM_RESERVED = lazy_re.compile(r"([\d.]{1,20}) (GiB|MiB) is reserved by PyTorch but unallocated")
# torch >= 2.1 lists every process on the device, then this process's tensors: what the process held when it died
# (diagnose/phase_facts.py weighs it against the model's weights).
_OOM_BY_TORCH = lazy_re.compile(r"Of the allocated memory ([\d.]{1,20}) (GiB|MiB) is allocated by PyTorch")
_OOM_GRAPH_POOLS = lazy_re.compile(r"with ([\d.]{1,20}) (GiB|MiB|KiB) allocated in private pools \(e\.g\., CUDA Graphs\)")
# torch's old wording when a backend leaves out the free figure (Intel XPU): "(GPU 0; 15.11 GiB total capacity;
# 11.09 GiB already allocated; 11.23 GiB reserved in total by PyTorch)"
_OOM_OLD_NO_FREE = lazy_re.compile(r"\((?:GPU|NPU|XPU) (\d+); ([\d.]{1,20}) (GiB|MiB) total capacity; ([\d.]{1,20}) "
                                   r"(GiB|MiB|KiB|bytes) already allocated")
_OOM_PROCESS = lazy_re.compile(r"\bProcess \d{1,10} has ([\d.]{1,20}) (GiB|MiB) memory in use")
_OOM_OLD = lazy_re.compile(
    r"Tried to allocate ([\d.]+) (GiB|MiB|KiB)\s*\((?:GPU|NPU|XPU) (\d+); ([\d.]+) (GiB|MiB) total capacity; "
    # torch_npu adds "58.92 GiB current active;" between the two
    r"([\d.]+) (GiB|MiB) already allocated; (?:[\d.]+ (?:GiB|MiB|KiB|bytes) current active; )?([\d.]+) (GiB|MiB|KiB|bytes) free"
)
# torch_npu's newer wording: "NPU memory is insufficient. Attempting to allocate 386.00 MiB (NPU 1; total capacity
# 29.49 GiB; allocated 28.90 GiB; currently active 28.90 GiB; free 171.96 MiB; ...)".
_OOM_NPU = lazy_re.compile(
    r"Attempting to allocate ([\d.]+) (GiB|MiB|KiB)\s*\(NPU (\d+); total capacity ([\d.]+) (GiB|MiB); allocated "
    r"([\d.]+) (GiB|MiB); (?:currently active [\d.]+ (?:GiB|MiB|KiB|B); )?free ([\d.]+) (GiB|MiB|KiB|B)"
)
_OOM_ALLOC_ONLY = lazy_re.compile(r"Tried to allocate ([\d.]+)\s*(GiB|MiB|KiB)")
# Other accelerators' words for their device memory running out, read as a GPU OOM (the same classes by phase):
# torch_npu's "NPU out of memory" (vllm-ascend, torch's old wording with "(NPU 0; ... total capacity; ...)"), Intel's
# "XPU out of memory", ROCm's HIP spellings.
_GPU_OOM_MARKERS = ("CUDA out of memory", "HIP out of memory", "XPU out of memory", "NPU out of memory",
                    "NPU memory is insufficient", "OutOfMemoryError",
                    "CUDA error: out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "cudaErrorMemoryAllocation",
                    "hipErrorOutOfMemory", "CUDNN_STATUS_ALLOC_FAILED", "NCCL WARN Cuda failure 'out of memory'",
                    "Tried to allocate")
_GPU_OOM_MARKERS_RX = lazy_re.compile("|".join(map(re.escape, _GPU_OOM_MARKERS)))
# XLA on TPU: "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm/vmem/smem"
# (the graphs compiled at start-up do not fit: the profile / warm-up phase), "RESOURCE_EXHAUSTED: Error allocating
# device buffer: Attempting to allocate 1.00G. That was not possible." (a buffer at run time). Only with its memory
# words: RESOURCE_EXHAUSTED alone is also gRPC's status for a rate limit.
_XLA_OOM = lazy_re.compile(r"RESOURCE_EXHAUSTED\b.{0,300}?(?:[Rr]an out of memory|[Oo]ut of memory|Error allocating device "
                           r"buffer|Attempting to allocate|memory space \w+)")
_XLA_COMPILE = "compile"
_HOST_WORDS = lazy_re.compile(r"\b(?:RAM|host memory|CPU memory|system memory|swap|memory is \d+\s*G|\d+\s*GB? of RAM)", re.IGNORECASE)
_GPU_WORDS = lazy_re.compile(r"\b(?:GPU|CUDA|VRAM|HBM|KV cache|HIP)\b", re.IGNORECASE)
_SHORTAGE = lazy_re.compile(r"insufficient|not enough|ran out of|run(?:ning)? out of|exhausted|out of memory|too little", re.IGNORECASE)
_SAMPLER = lazy_re.compile(r"out of memory occurred when warming up (sampler|pooler)[^\d]*(\d+) dummy requests")
# vLLM's OpenAI handlers log the exception a request met ("ERROR ... serving_chat.py:661] torch.OutOfMemoryError").
_SERVING_SRC = lazy_re.compile(r"(?:serving_\w+|api_server|protocol|launcher)\.py")
_FLAT_FRAME = lazy_re.compile(r'File "[^"]{1,500}\.py", line \d{1,9}, in ([\w.<>]{1,120})')
_STARTUP_FREE = lazy_re.compile(
    r"Free memory on device(?: [\w:]+)? \(([\d.]+)/([\d.]+) GiB\) on startup is less than desired GPU memory "
    r"utilization \(([\d.]+), ([\d.]+) GiB\)", re.IGNORECASE
)
# The CPU backend's versions of the same checks (host RAM of a NUMA node).
_CPU_STARTUP_FREE = lazy_re.compile(
    r"Available memory on node (\d+) \(([\d.]+)/([\d.]+) GiB\) on startup is less than desired CPU memory "
    r"utilization \(([\d.]+), ([\d.]+) GiB\)"
)
_CPU_KV_FREE = lazy_re.compile(
    r"Available memory on node (\d+) \(([\d.]+)/([\d.]+) GiB\) on kv cache allocation is less than requested "
    r"memory for kv \(([\d.]+)(?:/([\d.]+))? GiB\)"
)
_PROFILING_BAD = lazy_re.compile(r"Error in memory profiling\. Initial free memory ([\d.]+) GiB, current free memory ([\d.]+) GiB")
_V0_KV = lazy_re.compile(r"max\s+seq\s+len\s+\((\d+)\)\s+is\s+larger\s+than\s+the\s+maximum\s+number\s+of\s+tokens\s+that\s+can\s+be\s+"
                    r"stored\s+in\s+KV\s+cache\s+\((\d+)\)", re.IGNORECASE)
_V1_MAXLEN = lazy_re.compile(r"max\s+seq\s+len\s+\((\d+)\)", re.IGNORECASE)
_V1_NEEDED = lazy_re.compile(r"([\d.]{1,20})\s*GiB\s+KV\s+cache\s+is\s+needed", re.IGNORECASE)
_V1_AVAILABLE = lazy_re.compile(r"available\s+KV\s+cache\s+memory\s+\(([\d.]+)\s*GiB\)", re.IGNORECASE)
_V1_ESTIMATE = lazy_re.compile(r"estimated\s+maximum\s+model\s+length\s+is\s+([\d,]+)", re.IGNORECASE)
_MAMBA = lazy_re.compile(r"max_num_seqs \((\d+)\) exceeds available Mamba cache blocks \((\d+)\)")
_MAX_LEN = lazy_re.compile(
    r"(?:User-specified\s+)?max_model_len\s+\((\d+)\)\s+is\s+greater\s+than\s+the\s+derived\s+max_model_len"
    r"(?:\s+\((?:(\w+)=)?([\d.]+|None))?", re.IGNORECASE)
_USAGE = lazy_re.compile(r"usage: \S{1,100}(?: serve)? \[-h\]")
_UNRECOGNIZED = lazy_re.compile(r"(?:([\w./-]{1,100}): error: )?unrecognized arguments?:\s*(.{1,2000})$")
_ARG_INVALID = lazy_re.compile(r"([\w./-]{1,100}): error: argument ([^:]{1,200}): (.{1,2000})$")
_ARG_OTHER = lazy_re.compile(r"([\w./-]{1,100}): error: (.{1,2000})$")
_UNEXPECTED_KWARG = lazy_re.compile(r"(\w{1,60})\.__init__\(\) got an unexpected keyword argument '(\w+)'")
_VALIDATION = lazy_re.compile(r"validation errors? for (\w+)")
_RELATION = lazy_re.compile(r"\b[a-z][a-z0-9_]{2,60} \(\d[^)]{0,30}\) (?:is|must be|cannot be|should be) (?:smaller|larger|"
                       r"greater|less|lower|higher|bigger)(?: than| or equal to)+ (?:the )?[a-z][a-z0-9_]{2,60}\b")
_VALUE_ERROR = lazy_re.compile(r"^(?:Value error|Assertion failed|Input should be|Field required)[,:]?\s*(.*)")
_WORLD = lazy_re.compile(r"World size \((\d+)\) is larger than the number of available GPUs \((\d+)\)")
_DIVISIBLE = lazy_re.compile(r"(?:Total number of attention heads|number of \w+ heads|[\w ]{1,60}) \((\d+)\) must be divisible by tensor parallel size \((\d+)\)")
_SIGKILL = lazy_re.compile(
    r"exit ?code[:=]?\s*-9\b|exitcode[:=]\s*-9\b|(?:exit(?:ed)?(?: with)? (?:code|status)|code)[:=]?\s*137\b|"
    r"status=9/KILL|\bsignal 9\b|SIGKILL|received signal 9|^Killed\b|\d{1,10} Killed\s"
)
_EXIT_CODE = lazy_re.compile(
    r"exit ?code[:=]?\s*(-?\d+)|exitcode[:=]\s*(-?\d+)|died with exit code (-?\d+)|Failed core proc\(s\): \{[^}]*?:\s*(-?\d+)"
)
_MODEL_NOT_FOUND = ("Invalid repository ID or local directory", "is not a local folder and is not a valid model identifier",
                    "does not appear to have a file named config.json", "Repo id must be in the form",
                    "Repo id must use alphanumeric", "RepositoryNotFoundError", "HFValidationError",
                    "No such file or directory", "Can't load the configuration of", "not a valid model identifier",
                    "Unrecognized model in", "GatedRepoError", "You are trying to access a gated repo",
                    "is restricted. You must have access to it", "401 Client Error")
# The model id needs a Hugging Face token (gated or private): the same class, another fix.
_GATED = lazy_re.compile(r"GatedRepoError|gated repo|is restricted\. You must have access|401 Client Error")
_MODEL_NOT_FOUND_RX = lazy_re.compile("|".join(map(re.escape, _MODEL_NOT_FOUND)))
_CONFIG = ("not supported", "Not supported", "is unsupported", "Unsupported", "does not support", "No common block size",
           "must be divisible", "is larger than the number of available GPUs", "exceeds the total number of available GPUs",
           "compute capability", "is not compatible", "not implemented", "NotImplementedError", "is not divisible",
           "only supported", "requires", "cannot be used with", "is not available")
_CONFIG_RX = lazy_re.compile("|".join(map(re.escape, _CONFIG)))
_IMA = ("illegal memory access", "device-side assert", "misaligned address", "illegal instruction",
        "unspecified launch failure", "CUDA_ERROR_ILLEGAL_ADDRESS")
# A CUDA kernel's own assertion, printed before "device-side assert triggered" (often the only lines pasted):
# "../aten/src/ATen/native/cuda/Indexing.cu:1284: indexSelectLargeIndex: block: [0,0,0], thread: [24,0,0] Assertion ..."
# The kernel's name may be an operator ("IndexKernel.cu:93: operator(): block: ...") or a template.
_KERNEL_ASSERT = lazy_re.compile(r"\.cuh?:\d+: [\w:<>(), ]{1,200}?: block: \[[\d,]+\], thread: \[[\d,]+\] Assertion")
_IMA_RX = lazy_re.compile("|".join(map(re.escape, _IMA)))
# torch's boilerplate after any CUDA error; it names no fault of its own (an exception's one-line repr holds it
# after the real error: "RuntimeError('CUDA error: device-side assert triggered\\nCUDA kernel errors ... Compile
# with `TORCH_USE_CUDA_DSA` to enable device-side assertions.')").
_DSA_BOILERPLATE = "enable device-side assertions"
_HOST_ALLOC = ("DefaultCPUAllocator: can't allocate memory", "Cannot allocate memory", "cannot allocate memory",
               "std::bad_alloc", "node running low on memory", "OOMKilled", "killed by the OOM killer",
               "Failed with result 'oom-kill'", "NODE_OUT_OF_MEMORY", "Unable to allocate pinned memory")
_HOST_ALLOC_RX = lazy_re.compile("|".join(map(re.escape, _HOST_ALLOC)))
_ENGINE_DIED = ("EngineCore failed to start", "Engine core initialization failed", "EngineCore encountered a fatal error",
                "EngineDeadError", "died unexpectedly", "WorkerProc failed to start", "WorkerProc hit an exception",
                "Engine process failed to start", "Error executing method",
                # V0's API server after its engine process died (launcher.py, async_llm_engine.py)
                "is already dead, terminating server process", "AsyncEngineDeadError", "MQEngineDeadError",
                "Background loop has errored already")
_ENGINE_DIED_RX = lazy_re.compile("|".join(map(re.escape, _ENGINE_DIED)))


# Substring tests of the branches below, named so that the byte scan (SCAN) looks for the same text.
_TRACEBACK = "Traceback (most recent call last)"
_SAMPLER_WORDS = ("warming up", "occurred when")
_LOAD_OOM = "Failed to load model - not enough GPU memory"
_ALLOCATOR_ASSERT = "INTERNAL ASSERT FAILED"
_NO_KV = ("No available memory", "not enough GPU memory available to serve even a single token")
_KV_PROSE = lazy_re.compile(r"(?:insufficient|not enough|too small|too little)\W+(?:\w+\W+){0,2}KV cache|KV cache (?:is )?too small",
                       re.IGNORECASE)
_STARTUP_FREE_WORDS = "ree memory on device"
_PROFILING_BAD_WORDS = "Error in memory profiling"
_HOST_MEMORY_ERROR = "MemoryError"


def parse_errors(line: LogLine, col: Collector) -> None:
    msg = line.message
    st = col.state
    if msg.startswith(_TRACEBACK):
        col.start_traceback(line)
        return
    found = frame(msg)
    if found is not None:
        col.add_frame(line, found[0], component(found[1]))
        return
    if msg.count('File "') > 1:
        for name in _FLAT_FRAME.findall(msg):
            col.add_frame(line, name.rsplit(".", 1)[-1])
    if msg.startswith("usage: "):
        st.prog = msg[7:].split()[0] if len(msg) > 7 else None
        if _USAGE.match(msg) and not st.usage_seen:
            # argparse prints its usage before "error: ..." (or for --help, with the whole option list after it):
            # a usage dump whose error line was cut still says the command line was rejected.
            st.usage_seen = True
            col.signal(Signal.UNRECOGNIZED_ARGS, line, numbers={"prog": st.prog, "cue": "sig:argparse-usage"})
        return
    joined = f"{msg} {line.following}".strip() if line.following else msg
    advice = line.level in ("INFO", "WARNING", "DEBUG") and _ADVICE.search(msg) is not None
    note_paste_words(line, col, msg)
    if not advice and _oom(line, col, msg, joined):
        return
    if _kv(line, col, msg, joined):
        return
    if _arguments(line, col, msg, joined):
        return
    # PyTorch's boilerplate after any CUDA error ("Compile with `TORCH_USE_CUDA_DSA` to enable device-side
    # assertions.") names no fault: the error line above it does.
    if _IMA_RX.search(msg.replace(_DSA_BOILERPLATE, "") if _DSA_BOILERPLATE in msg else msg) \
            or _KERNEL_ASSERT.search(msg):
        col.signal(Signal.ILLEGAL_MEMORY_ACCESS, line)
        return
    if (not line.kernel and _HOST_ALLOC_RX.search(msg) and "NCCL WARN" not in msg and "ibv_" not in msg) \
            or (msg.startswith(_HOST_MEMORY_ERROR) and not line.kernel):
        col.signal(Signal.HOST_ALLOC_FAILURE, line)
        return
    if "Killed" in msg or "KILL" in msg or "137" in msg or "-9" in msg or "signal 9" in msg:
        if not line.kernel and _SIGKILL.search(msg):
            col.signal(Signal.SIGKILL, line, numbers={"exit_code": 137})
            return
    if line.prose and "emory" in joined and _SHORTAGE.search(msg) and looks_like_words(msg) and _HOST_WORDS.search(joined) and not _GPU_WORDS.search(joined):
        col.signal(Signal.HOST_PROSE, line)
        return
    if _ENGINE_DIED_RX.search(msg):
        numbers = {}
        e = _EXIT_CODE.search(msg)
        if e:
            code = integer(next(g for g in e.groups() if g is not None))
            numbers["exit_code"] = code
        method = _METHOD.search(msg)
        if method:
            # The method the driver asked the worker to run is the outermost frame of the worker's traceback.
            col.add_outer_frame(line, method.group(1))
        col.signal(Signal.ENGINE_DIED, line, numbers=numbers)
        return
    if parse_fragment(line, col, msg):
        return
    if parse_environment(line, col, msg, joined):
        return
    if _config(line, col, msg):
        return
    if (line.prose or not line.level) and not advice and parse_paraphrase(line, col, msg, joined):
        return
    m = _EXCEPTION.match(msg)
    if m and m.group(1) not in ("Exception", "KeyboardInterrupt", "SystemExit") or (m and m.group(2)):
        if m.group(1) not in ("KeyboardInterrupt", "SystemExit", "CancelledError"):
            numbers: dict[str, object] = {"exception": m.group(1)}
            if m.group(2) and PYTHON_MESSAGE.search(m.group(2)):
                numbers["python"] = True
            module = msg.split(":", 1)[0]
            if "." in module:
                numbers["module"] = module.split(".", 1)[0]  # "ray.exceptions.RayTaskError": the raiser's package
            if msg.startswith(_CLIENT_MODULES) or m.group(1) in _CLIENT_EXCEPTIONS:
                # the client's exception (openai, requests, httpx...): what it says is about the server's answer,
                # not an error vLLM raised; its own feature, so that it gets its own weight
                numbers["cue"] = "sig:client-exception"
            col.signal(Signal.GENERIC_EXCEPTION, line, numbers=numbers)


# HTTP clients' exceptions (a user's script or a benchmark calling the server): modules, and the openai SDK's
# classes when printed without their module.
_CLIENT_MODULES = ("openai.", "requests.exceptions.", "httpx.", "aiohttp.", "urllib3.exceptions.", "httpcore.")
_CLIENT_EXCEPTIONS = frozenset({"APIConnectionError", "APITimeoutError", "APIStatusError", "BadRequestError",
                                "InternalServerError", "NotFoundError", "UnprocessableEntityError", "RateLimitError"})


_HOST_NAMED_OOM = lazy_re.compile(r"(?<![A-Za-z])(?:host|system|cpu|RAM)[\s_-]+(?:out[\s_-]of[\s_-]memory|OOM(?![A-Za-z]))",
                                  re.IGNORECASE)


def _oom(line: LogLine, col: Collector, msg: str, joined: str) -> bool:
    m = _SAMPLER.search(joined) if any(w in msg for w in _SAMPLER_WORDS) else None
    if m:
        col.signal(Signal.SAMPLER_WARMUP_OOM, line, numbers={"what": m.group(1), "num_dummy": integer(m.group(2))})
        return True
    if _LOAD_OOM in msg:
        col.signal(Signal.LOAD_OOM, line)
        return True
    if "node running low on memory" in msg or "ray.exceptions.OutOfMemoryError" in msg:
        return False  # Ray's host-memory monitor: handled as host OOM
    if "RESOURCE_EXHAUSTED" in msg and _XLA_OOM.search(msg):
        # a TPU's HBM (or its on-chip memories) ran out; compiling the start-up graphs is the profile / warm-up
        hints = frozenset({"profile"}) if _XLA_COMPILE in msg else frozenset()
        col.signal(Signal.CUDA_OOM, line, numbers={"accelerator": "tpu"},
                   hints=hints | (phase_hints(joined) if line.prose else frozenset()))
        return True
    if _GPU_OOM_MARKERS_RX.search(msg) or ("out of memory" in msg and not line.kernel and _gpu_context(msg)):
        numbers = _oom_numbers(msg)
        if line.src and _SERVING_SRC.match(line.src):
            numbers["logged_by_server"] = line.src
        col.signal(Signal.CUDA_OOM, line, numbers=numbers, hints=phase_hints(joined) if line.prose else frozenset())
        if "gpu" in numbers and "total_gib" in numbers:
            col.add_gpu(numbers["gpu"], total_bytes=int(numbers["total_gib"] * (1 << 30)))
        return True
    if _ALLOCATOR_ASSERT in msg and "CUDACachingAllocator" in joined:
        col.signal(Signal.ALLOCATOR_FAILURE, line)
        return True
    if line.kernel:
        return False
    if _OOM_WORD.search(msg) or ("out of memory" in msg.lower() and "Out of memory: Kill" not in msg):
        if _CJK.search(msg):
            return False  # a sentence in Chinese: the paraphrase tier reads it (parsers/paraphrase.py)
        if (_HOST_KILL_WORDS.search(joined) or _HOST_NAMED_OOM.search(msg)) and not _GPU_OOM_MARKERS_RX.search(msg):
            # "CPU Out of Memory", "host OOM": the memory is named before the OOM (Ray's and RL frameworks' words)
            col.signal(Signal.HOST_PROSE, line)
            return True
        if line.level in ("INFO", "DEBUG"):
            return False  # vLLM reports an OOM at WARNING or above; INFO lines only talk about one
        if (line.level or looks_like_words(msg)) and not re.search(r"\b(?:RAM|host memory|CPU memory|system memory|swap)\b", msg):
            col.signal(Signal.OOM_PROSE, line, hints=phase_hints(joined), numbers=_flags_mentioned(joined))
            return True
    return False


def _gpu_context(msg: str) -> bool:
    return not any(k in msg for k in ("Memory cgroup", "Killed process", "host", "RAM", "CPU"))


def _oom_numbers(msg: str) -> dict[str, float | int]:
    out: dict[str, float | int] = {}
    m = _OOM_NEW.search(msg)
    if m:
        out.update(alloc_gib=to_gib(m.group(1), m.group(2)), gpu=integer(m.group(3)),
                   total_gib=to_gib(m.group(4), m.group(5)), free_gib=to_gib(m.group(6), m.group(7)))
    else:
        m = _OOM_OLD.search(msg) or (_OOM_NPU.search(msg) if "NPU" in msg else None)
        if m:
            out.update(alloc_gib=to_gib(m.group(1), m.group(2)), gpu=integer(m.group(3)),
                       total_gib=to_gib(m.group(4), m.group(5)), allocated_gib=to_gib(m.group(6), m.group(7)),
                       free_gib=to_gib(m.group(8), m.group(9)))
        else:
            m = _OOM_ALLOC_ONLY.search(msg)
            if m:
                out["alloc_gib"] = to_gib(m.group(1), m.group(2))
    _one_size_each(msg, out, (("in_use_gib", _OOM_IN_USE), ("reserved_unallocated_gib", _OOM_RESERVED)))
    try:  # a garbled figure here loses only itself, not the OOM line it sits in
        _one_size_each(msg, out, (("torch_allocated_gib", _OOM_BY_TORCH), ("graph_pools_gib", _OOM_GRAPH_POOLS)))
        m = _OOM_OLD_NO_FREE.search(msg) if "allocated_gib" not in out else None
        if m:
            out.setdefault("gpu", integer(m.group(1)))
            out.setdefault("total_gib", to_gib(m.group(2), m.group(3)))
            out["allocated_gib"] = to_gib(m.group(4), m.group(5))
        procs = tuple(to_gib(m.group(1), m.group(2)) for m in _OOM_PROCESS.finditer(msg))[:16]
        if procs:
            out["processes_gib"] = procs  # type: ignore[assignment]
    except BadNumber:
        pass
    return out


def _one_size_each(msg: str, out: dict, figures) -> None:
    """Each (key, pattern): the size its first match names (number, unit), in GiB."""
    for key, pattern in figures:
        m = pattern.search(msg)
        if m:
            out[key] = to_gib(m.group(1), m.group(2))


def _flags_mentioned(text: str) -> dict[str, object]:
    flags = sorted(set(f.replace("_", "-").lstrip("-") for f in re.findall(r"--?[a-z][\w-]+", text)))
    return {"flags_mentioned": flags} if flags else {}


def _kv(line: LogLine, col: Collector, msg: str, joined: str) -> bool:
    if any(w in msg for w in _NO_KV):
        col.signal(Signal.NO_KV_MEMORY, line)
        return True
    low = joined.lower()
    # Wrapped (a terminal or a paste cut the line), lower-cased or truncated forms of vLLM's two messages.
    m = _V0_KV.search(joined) if "max seq" in low or "seq len" in low else None
    if m:
        col.signal(Signal.KV_TOO_SMALL, line, numbers={"max_model_len": integer(m.group(1)),
                                                       "kv_tokens": integer(m.group(2))})
        return True
    if "kv cache" in msg.lower() and _V1_NEEDED.search(joined):
        numbers: dict[str, float | int] = {"needed_gib": num(_V1_NEEDED.search(joined).group(1))}  # type: ignore[union-attr]
        for rx, key in ((_V1_AVAILABLE, "available_gib"), (_V1_ESTIMATE, "estimated_max_len"), (_V1_MAXLEN, "max_model_len")):
            mm = rx.search(joined)
            if mm:
                numbers[key] = num(mm.group(1)) if key == "available_gib" else integer(mm.group(1))
        col.signal(Signal.KV_TOO_SMALL, line, numbers=numbers)
        return True
    if ("max seq len" in msg.lower() or "to serve at least one request" in msg.lower()) and (
            "estimated maximum model length" in low or "kv cache" in low):
        numbers = {}
        for rx, key in ((_V1_ESTIMATE, "estimated_max_len"), (_V1_MAXLEN, "max_model_len")):
            mm = rx.search(joined)
            if mm:
                numbers[key] = integer(mm.group(1))
        col.signal(Signal.KV_TOO_SMALL, line, numbers=numbers)
        return True
    if "larger than the maximum number of tokens that can be stored in kv cache" in low and not line.prose:
        col.signal(Signal.KV_TOO_SMALL, line)
        return True
    if _KV_PROSE.search(joined) and line.prose and looks_like_words(msg):
        col.signal(Signal.KV_PROSE, line, numbers=_flags_mentioned(joined))
        return True
    m = _MAMBA.search(msg)
    if m:
        col.signal(Signal.MAMBA_LIMIT, line, numbers={"max_num_seqs": integer(m.group(1)), "mamba_blocks": integer(m.group(2))})
        return True
    m = _STARTUP_FREE.search(joined) if _STARTUP_FREE_WORDS in msg else None
    if m:
        col.signal(Signal.STARTUP_FREE_MEMORY, line, numbers={
            "free_gib": num(m.group(1)), "total_gib": num(m.group(2)),
            "gpu_memory_utilization": num(m.group(3)), "requested_gib": num(m.group(4))})
        return True
    if "Available memory on node" in msg:
        m = _CPU_STARTUP_FREE.search(msg)
        if m:
            col.platform = col.platform or "cpu"
            col.signal(Signal.STARTUP_FREE_MEMORY, line, numbers={
                "free_gib": num(m.group(2)), "total_gib": num(m.group(3)),
                "gpu_memory_utilization": num(m.group(4)), "requested_gib": num(m.group(5)), "host": True})
            return True
        m = _CPU_KV_FREE.search(msg)
        if m:
            col.platform = col.platform or "cpu"
            col.signal(Signal.STARTUP_FREE_MEMORY, line, numbers={
                "free_gib": num(m.group(2)), "total_gib": num(m.group(3)), "kv_requested_gib": num(m.group(4)),
                "host": True})
            return True
    m = _PROFILING_BAD.search(joined) if _PROFILING_BAD_WORDS in msg else None
    if m:
        col.signal(Signal.PROFILING_INCONSISTENT, line, numbers={
            "initial_free_gib": num(m.group(1)), "current_free_gib": num(m.group(2))})
        return True
    return False


def _arguments(line: LogLine, col: Collector, msg: str, joined: str = "") -> bool:
    st = col.state
    m = _MAX_LEN.search(joined or msg) if "max_model_len" in msg.lower() else None
    if m:
        derived = m.group(3) or "None"
        col.signal(Signal.MAX_LEN_EXCEEDS, line, numbers={
            "max_model_len": integer(m.group(1)),
            **({"derived_max_len": int(num(derived))} if derived != "None" else {}),
            **({"derived_from": m.group(2)} if m.group(2) else {})})
        return True
    if "unrecognized argument" in msg:
        m = _UNRECOGNIZED.search(msg)
        if m:
            col.signal(Signal.UNRECOGNIZED_ARGS, line, numbers={"args": m.group(2).strip(), "prog": m.group(1) or st.prog})
            return True
    m = _UNEXPECTED_KWARG.search(msg)
    if m:
        col.signal(Signal.UNRECOGNIZED_ARGS, line, numbers={"args": m.group(2), "prog": m.group(1), "keyword": True})
        return True
    if ": error: " in msg:
        m = _ARG_INVALID.search(msg)
        if m:
            col.signal(Signal.INVALID_ARG_VALUE, line, numbers={"arg": m.group(2).strip(), "problem": m.group(3)})
            return True
        m = _ARG_OTHER.search(msg)
        if m and (st.prog or m.group(1).endswith(("vllm", "serve", ".py"))):
            col.signal(Signal.INVALID_ARG_VALUE, line, numbers={"problem": m.group(2)})
            return True
    m = _VALIDATION.search(msg)
    if m:
        st.pending_validation[line.proc] = m.group(1)
        f = re.match(r"([a-z_][a-z0-9_.]{1,60})\s+(?:Input should|Value error|Field required)", line.following)
        if f:
            st.pending_field[line.proc] = f.group(1)
        return True
    if line.proc in st.pending_validation:
        if re.fullmatch(r"[a-z_][a-z0-9_.]{1,60}", msg):
            st.pending_field[line.proc] = msg  # pydantic names the field on its own line
            return True
        v = _VALUE_ERROR.match(msg)
        if v:
            config = st.pending_validation.pop(line.proc)
            field = st.pending_field.pop(line.proc, None)
            detail = v.group(1) if not msg.startswith("Input should") else msg
            if _MODEL_NOT_FOUND_RX.search(detail):
                col.signal(Signal.MODEL_NOT_FOUND, line, numbers={"config": config})
            elif _RELATION.search(detail):
                # two settings that do not fit together ("max_num_batched_tokens (2048) is smaller than
                # max_model_len (40960)"): each value is valid, the configuration is not
                col.signal(Signal.CONFIG_REJECTED, line, numbers={"config": config, "detail": detail[:300]})
            elif _CONFIG_RX.search(detail) and not re.search(r"must be|should be|got \w+:|invalid", detail):
                col.signal(Signal.CONFIG_REJECTED, line, numbers={"config": config, "detail": detail[:300]})
            else:
                col.signal(Signal.INVALID_ARG_VALUE, line, numbers={
                    "config": config, "problem": detail[:300], **({"arg": field} if field else {})})
            return True
    if _MODEL_NOT_FOUND_RX.search(msg) and ("model" in msg.lower() or "repo" in msg.lower() or "config" in msg):
        col.signal(Signal.MODEL_NOT_FOUND, line, numbers={"gated": True} if _GATED.search(msg) else {})
        return True
    return False


# The machine cannot run this launch at all (no GPU visible, a wheel without kernels for this GPU, CUDA in a
# forked process, a Triton kernel larger than the GPU's shared memory): configuration, not memory.
_MACHINE = lazy_re.compile(r"Failed to infer device type|No CUDA GPUs are available|Found no NVIDIA driver|"
                      r"no kernel image is available for execution|Cannot re-initialize CUDA in forked subprocess|"
                      r"OutOfResources: out of resource: shared memory")
# The installed torch / vLLM wheels were built for a newer CUDA than the driver supports: the wrong build is
# installed (missing-dependency: install the build for this driver, or upgrade the driver).
_DRIVER_TOO_OLD = lazy_re.compile(r"CUDA driver version is insufficient|NVIDIA driver on your system is too old|"
                             r"driver (?:version )?is too old|cudaErrorInsufficientDriver")


def _config(line: LogLine, col: Collector, msg: str) -> bool:
    d = _DRIVER_TOO_OLD.search(msg)
    if d and (_EXCEPTION.match(msg) or line.level in ("ERROR", "CRITICAL") or line.prose or re.match(r"^[\w.]+: ", msg)):
        col.signal(Signal.MISSING_DEPENDENCY, line, numbers={"driver": True, "detail": msg[:300]})
        return True
    m = _MACHINE.search(msg)
    if m and (_EXCEPTION.match(msg) or line.level in ("ERROR", "CRITICAL") or re.match(r"^[\w.]+: ", msg)):
        col.signal(Signal.CONFIG_REJECTED, line, numbers={"detail": msg[:300], "machine": m.group(0)})
        return True
    m = _WORLD.search(msg)
    if m:
        col.signal(Signal.CONFIG_REJECTED, line, numbers={"world_size": integer(m.group(1)), "available_gpus": integer(m.group(2))})
        return True
    m = _DIVISIBLE.search(msg) if "must be divisible" in msg else None
    if m:
        col.signal(Signal.CONFIG_REJECTED, line, numbers={"heads": integer(m.group(1)), "tensor_parallel_size": integer(m.group(2))})
        return True
    exc = _EXCEPTION.match(msg)
    is_exception = exc is not None and exc.group(1) in ("ValueError", "NotImplementedError", "AssertionError", "RuntimeError", "TypeError")
    if _CONFIG_RX.search(msg) and (is_exception or line.level == "ERROR"):
        col.signal(Signal.CONFIG_REJECTED, line, numbers={"detail": msg[:300]})
        return True
    return False


# For diagnose's byte scan (parsers/scanset.py: every module-level pattern here is scanned, but NOT_SCANNED; SCAN
# adds the literals where a substring test alone decides).
# Two patterns are written for the scan:
# - _USAGE_SCAN for ``msg.startswith("usage: ")``: argparse's usage line names a program, never a number, and
#   "usage: " alone is on every metrics line ("GPU KV cache usage: 22.8%");
# - _LOWERCASE_SCAN for the tests on lower-cased text (``"out of memory" in msg.lower()``, ``"max seq" in low``...).
_USAGE_SCAN = lazy_re.compile(r"usage: (?![0-9])")
_LOWERCASE_SCAN = lazy_re.compile(r"out of memory|max seq|seq len|to serve at least one request|"
                             r"larger than the maximum number of tokens that can be stored in kv cache", re.IGNORECASE)
SCAN = (_TRACEBACK, *_SAMPLER_WORDS, _LOAD_OOM, _ALLOCATOR_ASSERT, *_NO_KV, _STARTUP_FREE_WORDS, _PROFILING_BAD_WORDS,
        _HOST_MEMORY_ERROR)
# Helpers on lines already chosen (an OOM's sizes are scanned: they name its line), and words too common to
# choose a line by: a request echo (the scanner's FREQUENT lines), advice, any CJK character, a serving module's
# file name, the GPU / host words of a shortage that _SHORTAGE finds.
NOT_SCANNED = (REQUEST_ECHO, _ADVICE, _CJK, _SERVING_SRC, _HOST_WORDS, _GPU_WORDS, _METHOD)
