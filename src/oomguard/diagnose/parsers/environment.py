"""Failures of the environment rather than of memory or flags: missing modules, chat templates,
NCCL and Ray placement.

Recognised (exception lines or ``ERROR`` records only: vLLM logs the same words as
``WARNING`` when it falls back by itself, e.g. "Failed to import from vllm._C" on a CPU host):
- ``ImportError: Please install vllm[audio] for audio support``; ``ModuleNotFoundError: No module
  named 'flash_attn'``; ``ImportError: X is not installed. Please install it ...``;
  ``ImportError: libcudart.so.12: cannot open shared object file``; ``cannot import name``;
- chat templates: transformers' "default chat template is no longer allowed" / "Cannot use chat
  template functions because tokenizer.chat_template is not set", jinja2's ``TemplateError`` /
  ``TemplateSyntaxError`` / ``UndefinedError``, vLLM's "Error in applying chat template";
- NCCL: ``NCCL error``, ``DistBackendError``, ``nccl*Error`` codes, and the ``NCCL WARN`` lines that
  name the host cause (``/dev/shm`` segment creation or ``posix_fallocate`` failures, peer access
  not supported, socket / bootstrap interface problems), the watchdog timeout;
- Ray: "Cannot provide a placement group of placement_group_specs=[...] within N seconds", "The
  number of required GPUs exceeds the total number of available GPUs in the placement group",
  "Current node has no GPU available", with the requested and available GPU counts.
"""

from __future__ import annotations

import re

from oomguard.diagnose.events import LogLine, Signal, error_record
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.parsers.numbers import integer, num
import oomguard.lazy_re as lazy_re

_CJK = lazy_re.compile(r"[\u3400-\u9fff]")
_IMPORT = lazy_re.compile(r"^(?:[\w.]+\.)?(ImportError|ModuleNotFoundError|OSError)(?::\s*(.*))?$")
_IMPORT_ANYWHERE = lazy_re.compile(r"\b(ImportError|ModuleNotFoundError)(?::\s*(.*))$")
_PLEASE_INSTALL = lazy_re.compile(r"(?<![\w])()([Pp]lease install [`'\"]?vllm\[[\w,-]{1,40}\].*)$")
_EXTRA = lazy_re.compile(r"(?:pip install |[Pp]lease install )[`'\"]?(vllm\[[\w,-]{1,40}\])")
_NO_MODULE = lazy_re.compile(r"No module named '([\w.]{1,100})'")
_PIP = lazy_re.compile(r"pip install\s+[`'\"]?([\w.\[\],<>=-]{1,80})")
_NOT_INSTALLED = lazy_re.compile(r"\b([\w.-]{1,60}) (?:is|are) not installed")
_SHARED_OBJECT = lazy_re.compile(r"([\w.+-]{1,80}\.so[\w.]*): cannot open shared object file")
# Not the driver's libcuda.so (absent on every CPU-only host, where the CPU build runs without it): the CUDA runtime,
# torch's own libraries or a symbol mismatch mean the wheel was built for another CUDA / torch.
def _broken_build(msg: str) -> bool:
    lib = _SHARED_OBJECT.search(msg)
    return "undefined symbol" in msg or (lib is not None and not lib.group(1).startswith("libcuda.so"))
# "missing vllm[audio]", "need to install vllm[video]" in someone's words
_EXTRA_WORDS = lazy_re.compile(r"(?:missing|install|need|requires?|without)\b.{0,30}?(vllm\[[\w,-]{1,40}\])", re.IGNORECASE)
_CANNOT_IMPORT = lazy_re.compile(r"cannot import name '(\w{1,100})' from '([\w.]{1,100})'")

_TEMPLATE_STRONG = lazy_re.compile(r"default chat template is no longer allowed|ChatTemplateResolutionError|"
                              r"Cannot use chat template functions because tokenizer\.chat_template is not set")
_TEMPLATE = ("default chat template is no longer allowed", "chat_template is not set",
             "Error in applying chat template", "TemplateError", "TemplateSyntaxError", "UndefinedError",
             "Conversation roles must alternate", "chat template", "chat_template")
_TEMPLATE_RX = lazy_re.compile("|".join(map(re.escape, _TEMPLATE)))

_NCCL_ERROR = lazy_re.compile(r"NCCL ?error|NCCL_ERROR_[A-Z_]+|NcclError|DistBackendError|\bnccl(?:UnhandledCuda|System|Internal|InvalidUsage|Remote|"
                         r"InvalidArgument)Error\b|NCCL Error \d|ProcessGroupNCCL|WorkNCCL|"
                         # the same library on other accelerators: ROCm's RCCL (NCCL's API and words), Ascend's HCCL
                         # (torch_npu: "HCCL function error: HcclCommInitRootInfo(...), error code is 7", "[ERROR] HCCL
                         # error in: ProcessGroupHCCL.cpp", "DIST call hccl api failed")
                         r"RCCL ?error|HCCL (?:function )?error|ProcessGroupHCCL|hccl api failed|\bHccl\w*Error", re.IGNORECASE)
# Ascend's error codes of HCCL (EI****: communication) in a CANN error record, e.g. "EI0007: ... Failed to allocate
# resource[qp]": an HCCL failure even when the line does not say HCCL.
_HCCL_CODE = lazy_re.compile(r"\bEI\d{4}\b[:\]]")
_NCCL_SHM = lazy_re.compile(r"/dev/shm|posix_fallocate|shared memory segment|No space left on device", re.IGNORECASE)
_NCCL_P2P = lazy_re.compile(r"peer access|P2P|NVLink|peer mapping", re.IGNORECASE)
_NCCL_NET = lazy_re.compile(r"ibv_\w+|ibverbs|NET/IB|NET/Socket|Bootstrap|no socket interface|socket|NCCL_SOCKET_IFNAME|IB\b|InfiniBand|"
                       r"Connection (?:refused|reset|closed)", re.IGNORECASE)
_SHM_SIZE = lazy_re.compile(r"\(size (\d{1,20})\)")
_PG_INIT_TIMEOUT = lazy_re.compile(r"Timed out initializing process group|store based barrier|"
                              r"\[c10d\] The client socket has timed out|TCP client failed to connect|"
                              r"\[c10d\] .{0,60}(?:Connection refused|failed to connect)")
_NCCL_TIMEOUT = lazy_re.compile(r"Watchdog caught collective operation timeout|collective operation timeout", re.IGNORECASE)

_PLACEMENT = lazy_re.compile(r"Cannot provide a placement group of placement_group_specs=(\[.{0,4000}?\])"
                        r"(?:\s*within (\d{1,9}) seconds)?")
_PLACEMENT_OTHER = ("required GPUs exceeds the total number of available GPUs in the placement group",
                    "exceeds available GPUs",  # ray_utils: "Tensor parallel size (16) exceeds available GPUs (8)"
                    "Ray does not allocate any GPUs on the driver node",
                    "Current node has no GPU available", "No available node types can fulfill resource request")
_WAITING = lazy_re.compile(r"Waiting for creating a placement group of specs for (\d{1,9}) seconds")
_GPU_SPEC = lazy_re.compile(r"['\"]GPU['\"]:\s*([\d.]{1,12})")
_AVAILABLE = lazy_re.compile(r"(?:available GPUs|GPUs available)\s*\(?(\d{1,6})\)?|current_node_resource=\{[^}]*?['\"]GPU['\"]:\s*"
                        r"([\d.]{1,12})|['\"]GPU['\"]:\s*([\d.]{1,12})\}?\s*(?:available|in the cluster)", re.IGNORECASE)


_TP_EXCEEDS = lazy_re.compile(r"(?:Tensor parallel size|world size)\s*\((\d{1,6})\) exceeds available GPUs \((\d{1,6})\)",
                         re.IGNORECASE)
# `ray status`: " 0.0/4.0 GPU" (used/total in the cluster); recorded as the available count for placement.
_RAY_STATUS_GPU = lazy_re.compile(r"^\s*([\d.]{1,12})/([\d.]{1,12}) GPU\b")


_TRANSFORMERS_TOO_OLD = ("Transformers does not recognize this architecture", "requires a newer version of transformers")
_NCCL_WARN = "NCCL WARN"


def _is_error_record(line: LogLine, msg: str) -> bool:
    return line.level in ("ERROR", "CRITICAL") or error_record(msg)


def parse_environment(line: LogLine, col: Collector, msg: str, joined: str) -> bool:
    if "GPU" in msg and "/" in msg:
        m = _RAY_STATUS_GPU.match(msg)
        if m:
            col.ray_gpus = int(num(m.group(2), lo=0, hi=1e6))
            return True
    if line.level == "WARNING" and "Failed to import from vllm" in msg and _broken_build(msg):
        # vLLM's compiled ops cannot load (a wheel built for another CUDA / torch): it logs a WARNING and then
        # fails on the first custom op. (Its WARNING for a missing vllm._C on CPU / NPU hosts is routine.)
        lib = _SHARED_OBJECT.search(msg)
        col.signal(Signal.MISSING_DEPENDENCY, line, numbers={"cue": "sig:vllm-ops-unloadable", "detail": msg[:300],
                                                             **({"library": lib.group(1)} if lib else {})})
        return True
    if line.level in ("INFO", "DEBUG", "WARNING") and "NCCL WARN" not in msg and "placement group" not in msg:
        return False
    if ("NCCL" in msg or "nccl" in msg or "WorkNCCL" in msg or "DistBackendError" in msg or "process group" in msg
            or "c10d" in msg or "TCPStore" in msg or "CCL" in msg or "ccl" in msg or "EI" in msg):
        if _nccl(line, col, msg, joined):
            return True
    if "placement" in msg or "GPU available" in msg or "fulfill resource request" in msg:
        if _ray(line, col, msg, joined):
            return True
    if "undefined symbol" in msg and (line.prose or _is_error_record(line, msg) or _CJK.search(msg)) \
            and not _IMPORT.match(msg):
        # a compiled extension (vLLM's, flash-attn's) built against another torch: an ImportError's own words
        lib = re.search(r"([\w.+-]{1,80}\.so)\b", msg)
        col.signal(Signal.MISSING_DEPENDENCY, line, numbers={"mismatch": True, "detail": msg[:300],
                                                             **({"library": lib.group(1)} if lib else {}),
                                                             **({"tier": "paraphrase"} if line.prose else {})})
        return True
    if line.prose and "vllm[" in msg:
        e = _EXTRA_WORDS.search(msg)
        if e and not _IMPORT_ANYWHERE.search(msg):
            col.signal(Signal.MISSING_DEPENDENCY, line, numbers={"tier": "paraphrase", "extra": e.group(1),
                                                                 "detail": msg[:300]})
            return True
    m = _IMPORT.match(msg)
    if m is None and (line.prose or _is_error_record(line, msg)):
        # pasted inside a sentence, a title ("[Bug]: ModuleNotFoundError: ...") or behind a platform's prefix
        # ("[error]Please install vllm[audio] ..."); vLLM's own WARNING fallbacks never get here (level filter).
        m = _IMPORT_ANYWHERE.search(msg) or _PLEASE_INSTALL.search(msg)
    if m and (m.group(1) != "OSError" or "shared object" in msg):
        detail = m.group(2) or ""
        numbers: dict[str, object] = {"exception": m.group(1), "detail": detail[:300]}
        for rx, key in ((_EXTRA, "extra"), (_NO_MODULE, "module"), (_SHARED_OBJECT, "library"),
                        (_NOT_INSTALLED, "package"), (_PIP, "pip")):
            mm = rx.search(joined if key in ("extra", "pip") else detail)
            if mm:
                numbers[key] = mm.group(1)
        mm = _CANNOT_IMPORT.search(detail)
        if mm:
            numbers.update(name=mm.group(1), module=mm.group(2), mismatch=True)
        col.signal(Signal.MISSING_DEPENDENCY, line, numbers=numbers)
        return True
    if any(w in msg for w in _TRANSFORMERS_TOO_OLD) \
            or ("KeyError" in msg and "model_type" in joined and "transformers" in joined.lower()):
        if _is_error_record(line, msg) or line.prose:
            col.signal(Signal.MISSING_DEPENDENCY, line, numbers={"package": "transformers", "upgrade": True,
                                                                 "detail": msg[:300]})
            return True
    if _TEMPLATE_STRONG.search(msg):
        # transformers' own sentence, quoted in an issue, in backticks, a client's 400 body or a JSON error
        # (INFO / WARNING records returned above: only a raised error prints it)
        col.signal(Signal.CHAT_TEMPLATE, line, numbers={"detail": msg[:300]})
        return True
    if _is_error_record(line, msg) and _TEMPLATE_RX.search(joined):
        if "chat" in joined.lower() or "jinja" in msg or "Template" in msg or "Conversation roles" in joined:
            col.signal(Signal.CHAT_TEMPLATE, line, numbers={"detail": msg[:300]})
            return True
    return False


def _nccl(line: LogLine, col: Collector, msg: str, joined: str) -> bool:
    warn = _NCCL_WARN in msg
    if warn:
        cause = _nccl_cause(msg)
        if cause is None:
            return False  # other NCCL warnings are routine (NCCL_DEBUG=WARN prints some on healthy runs)
        numbers: dict[str, object] = {"cause": cause, "detail": msg[:300]}
        s = _SHM_SIZE.search(msg)
        if s and cause == "shm":
            numbers["shm_bytes"] = integer(s.group(1))
        col.signal(Signal.NCCL_ERROR, line, numbers=numbers)
        return True
    if _PG_INIT_TIMEOUT.search(msg):
        # torch.distributed never saw all ranks join: a worker on another node cannot reach the store (network)
        col.signal(Signal.NCCL_ERROR, line, numbers={"cause": "network", "detail": msg[:300]})
        return True
    if "EI" in msg and _HCCL_CODE.search(msg) and _is_error_record(line, msg):
        cause = _nccl_cause(joined)
        col.signal(Signal.NCCL_ERROR, line, numbers={"cause": cause, "detail": msg[:300]} if cause else {"detail": msg[:300]})
        return True
    if not (_NCCL_ERROR.search(msg) or _NCCL_TIMEOUT.search(msg)):
        return False
    if not _is_error_record(line, msg) and not line.prose and "NCCL error" not in msg and "WorkNCCL" not in msg \
            and "NCCL_ERROR_" not in msg:
        return False
    cause = "timeout" if _NCCL_TIMEOUT.search(msg) else _nccl_cause(joined)
    col.signal(Signal.NCCL_ERROR, line, numbers={"cause": cause, "detail": msg[:300]} if cause else {"detail": msg[:300]})
    return True


def _nccl_cause(text: str) -> str | None:
    if _NCCL_SHM.search(text):
        return "shm"
    if _NCCL_P2P.search(text):
        return "p2p"
    if _NCCL_NET.search(text):
        return "network"
    return None  # no host cause named (a GPU OOM inside NCCL is the OOM parser's)


def _ray(line: LogLine, col: Collector, msg: str, joined: str) -> bool:
    w = _WAITING.search(msg)
    if w:
        # vLLM logs this while the placement group is not ready (ray_utils: after 10, 30, 70... s); a start that
        # goes on logs it at most once, a stuck one until it gives up. Its own, weaker cue.
        requested = sum(num(g, lo=0, hi=1e6) for g in _GPU_SPEC.findall(msg))
        numbers: dict[str, object] = {"cue": "sig:ray-placement-wait", "waited_s": integer(w.group(1))}
        if requested:
            numbers["requested_gpus"] = int(round(requested))
        if col.ray_gpus is not None:
            numbers["available_gpus"] = col.ray_gpus
        col.signal(Signal.RAY_PLACEMENT, line, numbers=numbers)
        return True
    m = _PLACEMENT.search(joined)
    other = any(k in msg for k in _PLACEMENT_OTHER)
    if not m and not other:
        return False
    if line.level == "WARNING" and not other:
        return False
    numbers: dict[str, object] = {}
    if m:
        requested = sum(num(g, lo=0, hi=1e6) for g in _GPU_SPEC.findall(m.group(1)))
        numbers["requested_gpus"] = int(round(requested))
        numbers["bundles"] = m.group(1).count("{")
        if m.group(2):
            numbers["timeout_s"] = integer(m.group(2))
    t = _TP_EXCEEDS.search(msg)
    if t:
        numbers["requested_gpus"] = integer(t.group(1))
        numbers["available_gpus"] = integer(t.group(2))
        col.signal(Signal.RAY_PLACEMENT, line, numbers=numbers)
        return True
    a = _AVAILABLE.search(joined)
    if col.ray_gpus is not None and not a:
        numbers["available_gpus"] = col.ray_gpus
    elif a:
        numbers["available_gpus"] = int(num(next(g for g in a.groups() if g), lo=0, hi=1e6))
    elif "no GPU available" in msg:
        numbers["available_gpus"] = 0
    col.signal(Signal.RAY_PLACEMENT, line, numbers=numbers)
    return True


# For diagnose's byte scan (parsers/scanset.py: every module-level pattern here is scanned, but NOT_SCANNED; SCAN
# adds the literals where a substring test alone decides).
# "KeyError": the message side of the transformers check (its other words may be on the lines after it).
SCAN = (_NCCL_WARN, *_PLACEMENT_OTHER, *_TRANSFORMERS_TOO_OLD, "KeyError", "undefined symbol")
# Helpers on lines already chosen (an NCCL line's cause, a placement group's specs), or any CJK character.
NOT_SCANNED = (_CJK, _NCCL_SHM, _NCCL_P2P, _NCCL_NET, _SHM_SIZE, _GPU_SPEC)
