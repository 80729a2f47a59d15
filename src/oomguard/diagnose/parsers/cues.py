"""Report cues: words, tables and component names that bear on a class without being an error line.

The error parsers (``errors``, ``kernel``, ``environment``, ``paraphrase``) find *that* something
failed; these cues tell the scorer (``diagnose/scoring.py``) more about *which* failure it was:
a ``ps`` table or ``free -h`` output next to an OOM (host RAM), a pod memory limit, Ray's memory
monitor, a request with ``prompt_logprobs``, "after the weights load" / 加载完 / 推理时 (the phase in
the reporter's words), the component that printed the log (Ray, KServe, verl, vllm-ascend, ROCm...),
a pre-Ampere GPU (bf16 is not available there).

Adding a cue is one entry in ``TABLE`` (its feature name, a pattern, the literal keywords that let
its lines through the prefilter, whether only prose counts, and an example line) plus its prior
weight in ``src/oomguard/data/diagnose_priors.json``; ``scripts/train_diagnose.py`` then refits the
shipped weights. A test checks that every example matches its pattern and passes the prefilter.

Only the first occurrence of each feature is kept (with its count), so memory is bounded by the
size of this table whatever the size of the log.
"""

from __future__ import annotations

import re

from oomguard.diagnose.events import LogLine, error_record
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.parsers import devices
from oomguard.diagnose.parsers.fragments import KEYWORDS as FRAGMENT_KEYWORDS
from oomguard.diagnose.parsers.frames import PYTHON_MESSAGE
from oomguard.diagnose.trie import alternation
import oomguard.lazy_re as lazy_re  # a log's scan runs a few of the ~80 cue patterns: each compiles when first run
from oomguard.records import record


@record(frozen=True)
class CueRule:
    feature: str
    pattern: re.Pattern[str]
    keywords: tuple[bytes, ...]  # every line the pattern matches contains one of these (prefilter)
    prose: bool  # only lines people wrote (not log records) or CJK text count
    example: str
    failure: bool = False  # prose, CJK, or an error record (ERROR / CRITICAL, an exception line): words of a failure
    exact_keywords: bool = False  # keywords matched as written even when the pattern ignores case (see _caseless)
    states: bool = False  # the words state a failure of their own ("memory leak", "is not supported"): an anchor
    negatable: bool = False  # "no error", "无报错", "Failed requests: 0" say the opposite: such a match does not count


def _rule(feature: str, pattern: str, keywords: tuple[str, ...], example: str, *, prose: bool = False,
          failure: bool = False, flags: int = re.IGNORECASE, exact_keywords: bool = False,
          states: bool = False, negatable: bool = False) -> CueRule:
    return CueRule(feature, lazy_re.compile(pattern, flags), tuple(k.encode() for k in keywords), prose, example, failure,
                   exact_keywords, states, negatable)


# Applications that call a vLLM server (comp:client-app): platforms, front ends and HTTP tools people name.
_CLIENT_APPS = ("Dify", "dify", "Open WebUI", "open-webui", "OpenWebUI", "Jan.ai", "Postman", "postman", "Insomnia",
                "LangChain", "langchain", "LlamaIndex", "llama_index", "SillyTavern", "Chatbox", "Cherry Studio",
                "FastGPT", "RAGFlow", "ragflow", "AnythingLLM", "LobeChat", "LibreChat", "MaxKB", "one-api", "new-api",
                "OpenAI-API-compatible", "front end", "frontend", "front-end")
# "<verb> <adverb>" said of the server (words:server-works); also "successfully deployed / started".
_WORKS = tuple(f"{v} {a}" for v in ("works", "worked", "working", "work", "functioned", "functions", "runs", "ran",
                                    "running", "responds", "responded")
               for a in ("fine", "normally", "correctly", "properly", "as expected", "perfectly")) + tuple(
    f"successfully {v}" for v in ("deployed", "started", "launched", "running", "serving"))


def _words_rx(words: tuple[str, ...]) -> str:
    """An alternation of literal words; a short one (an acronym: HBM, HPU, NCCL) bounded as a word (a plural too), a
    longer one found inside others as well ("_capture_cudagraphs", "all_reduce_fused")."""
    def one(w: str) -> str:
        rx = re.escape(w)
        return rf"\b{rx}s?\b" if len(w) <= 4 and w.isascii() and w.isalnum() else rx
    return "|".join(one(w) for w in sorted(words, key=len, reverse=True))


def _short_rx(memory: tuple[str, ...]) -> str:
    words = _words_rx(memory)
    before = "|".join(re.escape(w) for w in devices.SHORT_BEFORE)
    after = "|".join(re.escape(w) for w in devices.SHORT_AFTER)
    return rf"(?:{before})\W+(?:[\w-]+\W+){{0,3}}?(?:{words})|(?:{words})\W+(?:[\w-]+\W+){{0,3}}?(?:{after})"


# (not the kernel's OOM killer: "OOM killer", "OOM-killed", "Out of memory: Killed process" are the host's)
_DEVICE_OOM_WORDS = (r"\bOOM(?:s|ed|'d)?\b(?![- ]?[Kk]ill)|\boom\b(?![- ]?kill)|[Oo]ut [Oo]f [Mm]emory(?!:? [Kk]ill)|"
                     r"OutOfMemory|memory (?:leak|growth|problem|issue)s?|(?:not|never) (?:released|freed)|r[au]n out\b|"
                     r"显存不足|爆显存|显存泄漏|显存溢出")
_DEVICE_WORDS = (r"\bGPUs?\b|\bgpus?\b|\bCUDA\b|\bcuda\b|\bdevice\b|\bVRAM\b|\bHBM\b|\bNPUs?\b|empty_cache|"
                 r"wak(?:e|ing)[_ -]?up|woken up|sleep mode|\bsleep\(|显存|显卡")
_COLL_FAILED = r"(?:timed? ?out|timeout|\bhang(?:s|ing)?\b|\bhung\b|\bstuck\b|\bfailed\b|\bfailure\b|\bdied\b|\bcrash)"
_BACKEND_EXAMPLES = {"rocm": "HIP out of memory on MI300X", "ascend": "vllm-ascend on 910B NPU",
                     "gaudi": "vllm-gaudi on Gaudi3 (HPU)", "tpu": "a v5e-8 TPU with tpu-inference",
                     "xpu": "Intel Arc A770 XPU with ipex"}

TABLE: tuple[CueRule, ...] = (
    # --- host memory ---------------------------------------------------------------------------
    _rule("host:ps-table", r"\bPID\b.{0,40}\b(?:VSZ|RSS|RES|%MEM)\b|\bVSZ\s+RSS\b",
          ("PID", "VSZ"), "USER  PID %CPU %MEM    VSZ   RSS TTY STAT START TIME COMMAND", flags=0),
    _rule("host:free-table", r"^\s*Mem:\s+\d|\btotal\s+used\s+free\s+shared\b",
          ("Mem:", "total        used", "total       used", "total used free"), "Mem:  251Gi  240Gi  2.1Gi  1.0Gi  9.2Gi  8.0Gi"),
    _rule("host:container-limit",
          r"memory\.max\b|memory\.limit_in_bytes|limits:\s*\{?\s*(?:cpu:[^,}]*,\s*)?memory|resources\.limits\.memory|"
          r"\bmemory limit\b|MemoryMax=|--memory[= ]\d|\bmem_limit\b|\bmemory:\s*\d+(?:Gi|G|Mi)\b|内存限制",
          ("memory.max", "memory.limit", "limits:", "limits.memory", "memory limit", "Memory limit", "MemoryMax",
           "--memory", "mem_limit", "memory: ", "内存限制"), "resources: limits: memory: 64Gi"),
    _rule("host:oomkilled", r"\bOOMKilled\b|exit(?:ed)?(?: with)? (?:code|status)[: ]*137\b|\bexitCode: 137\b|\bcode 137\b",
          ("OOMKilled", "code 137", "code: 137", "status 137", "status: 137", "exitCode: 137"),
          "Last State: Terminated  Reason: OOMKilled  Exit Code: 137", flags=0),
    _rule("host:memory-monitor",
          r"memory monitor|running low on memory|due to memory pressure|memory usage threshold|"
          r"ray\.exceptions\.OutOfMemoryError|killed due to (?:the )?(?:node|high memory)|"
          # the line Ray prints under every OOM kill it makes (its documentation's OOM-prevention page)
          r"address the out of memory issue|ray-oom-prevention",
          ("memory monitor", "Memory monitor", "low on memory", "memory pressure", "memory usage threshold",
           "ray.exceptions.OutOfMemoryError", "killed due to", "address the out of memory issue", "ray-oom-prevention"),
          "Task was killed due to the node running low on memory. Memory on the node was 60.1GB / 62.7GB"),
    # (not a device's RAM: "4 x 24 GB CUDA RAM", "GPU RAM", "video RAM" are the card's)
    _rule("host:ram-words", r"\b(?:RSS|(?<!GPU )(?<!CUDA )(?<!video )(?<!GPU's )RAM|host memory|system memory|CPU memory|"
                            r"host RAM|swap)\b|(?<!显)内存(?!溢出)",
          ("RSS", "RAM", "host memory", "system memory", "CPU memory", "swap", "内存"),
          "the RSS of the process grows to 120 GB of RAM", prose=True),
    _rule("host:offload", r"pin_memory|pinned memory|cpu[_-]offload|swap[_-]space|kv[_-]offloading|--swap-space",
          ("pin_memory", "pinned memory", "offload", "swap_space", "swap-space"), "--cpu-offload-gb 64", failure=True),
    _rule("host:cpu-backend", r"VLLM_CPU_KVCACHE_SPACE|\bCPU backend\b|cpu_worker\.py|--device[= ]cpu|device_config=cpu",
          ("VLLM_CPU", "CPU backend", "cpu_worker", "device cpu", "device=cpu", "device_config=cpu"),
          "VLLM_CPU_KVCACHE_SPACE=40"),
    # A memory failure said of the device (issue 16: which memory the words are about): out of memory, a leak, memory
    # not released, in the same sentence as the GPU, CUDA, the device, its cache (empty_cache) or vLLM's sleep mode
    # (sleep / wake_up move the weights and KV cache off and back onto the GPU). Against host:ram-words, whose "CPU
    # memory" and "offload" are often where the memory was meant to go, not what ran out.
    _rule("mem:device-oom", rf"(?:{_DEVICE_OOM_WORDS})[^\n]{{0,100}}?(?:{_DEVICE_WORDS})|"
                            rf"(?:{_DEVICE_WORDS})[^\n]{{0,100}}?(?:{_DEVICE_OOM_WORDS})",
          ("OOM", "oom", "out of memory", "Out of memory", "Out Of Memory", "OutOfMemory", "memory leak", "memory growth",
           "memory problem", "memory issue", "not released", "not freed", "never released", "never freed", "ran out",
           "run out", "显存不足", "爆显存", "显存泄漏", "显存溢出"),
          "the GPU memory is not released after sleep, so wake_up runs out of memory", failure=True,
          exact_keywords=True),
    # --- what the requests did ------------------------------------------------------------------
    _rule("req:logprobs", r"\b(?:prompt_)?logprobs\b(?!=None)|compute_logprobs|_get_prompt_logprobs",
          ("logprobs ", "logprobs`", "logprobs\"", "logprobs,", "logprobs.", "logprobs)", "logprobs=1", "logprobs=2",
           "logprobs=5", "compute_logprobs", "_get_prompt_logprobs", "logprobs:", "logprobs\n", "logprobs\r"),
          "it crashes when a request asks for prompt_logprobs"),
    _rule("req:long-prompt", r"long (?:prompts?|contexts?|inputs?|sequences?|documents?)|very long|长文本|长上下文|长输入|长序列",
          ("long prompt", "long context", "long input", "long sequence", "long document", "very long", "长文本",
           "长上下文", "长输入", "长序列"), "OOM with very long prompts", prose=True),
    _rule("req:concurrency",
          r"concurren|parallel requests|many requests|high load|under load|load test|stress test|benchmark_serving|"
          r"\bQPS\b|requests per second|并发|压测|多个请求|高负载",
          ("oncurren", "parallel requests", "many requests", "high load", "under load", "load test", "stress test",
           "benchmark_serving", "QPS", "requests per second", "并发", "压测", "多个请求", "高负载"),
          "it dies under load with 64 concurrent requests", prose=True),
    _rule("req:multimodal", r"\bimages?\b|\bvideos?\b|\bframes\b|multi-?modal|多模态|图片|图像|视频",
          ("image", "Image", "video", "Video", "frames", "modal", "多模态", "图片", "图像", "视频"),
          "sending 8 images per request", prose=True),
    _rule("req:spec-decode", r"speculative|spec[_ -]decod|draft model|\beagle\b|\bMTP\b|num_speculative_tokens|投机",
          ("peculative", "spec_decod", "spec decod", "spec-decod", "draft model", "eagle", "EAGLE", "Eagle", "MTP",
           "投机"), "--speculative-config '{\"method\": \"eagle\"}'", failure=True),
    _rule("req:lora", r"\bLoRA\b|lora_modules|enable[-_]lora|max_loras|--lora", ("LoRA", "lora_modules", "enable-lora",
                                                                            "enable_lora", "max_loras", "--lora"),
          "--enable-lora --max-loras 4", failure=True),
    # --- what the server answered ----------------------------------------------------------------
    # A 5xx in an access line: the server came up and then failed a request (a 4xx is the client's: a bad request,
    # an unknown route, a missing key). A failure on its own, whatever the serving lines around it say.
    _rule("serve:5xx", r'HTTP/\d(?:\.\d)?" 5\d\d\b', ('" 500', '" 502', '" 503', '" 504'),
          'INFO:     10.0.0.7:51820 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error', flags=0,
          states=True),
    # The same from the client's side: the openai SDK's "Error code: 500", a 5xx status in requests / httpx words.
    _rule("client:server-error", r"Error code: 5\d\d\b|\bInternalServerError\b|Server error '5\d\d|"
                                 r"\b5\d\d Server Error\b|status(?:_code)?[=: ]{1,3}5\d\d\b",
          ("Error code: 5", "InternalServerError", "Server error '5", "Server Error", "status=5", "status: 5",
           "status_code=5", "status_code: 5", "status 5"),
          "openai.InternalServerError: Error code: 500 - {'object': 'error', 'message': 'Internal Server Error'}",
          flags=0, states=True),
    # vLLM's own record of a request it dropped ("Aborted request chat-1a2b."), anywhere in a line: the engine was
    # running requests. The client's read timeout ("Read timed out", httpx's ReadTimeout): the server had accepted
    # the connection and the client gave up waiting for the answer; vLLM's API server opens its port only once the
    # engine is up (classifier.py: a complaint in words with these is about a server that serves).
    _rule("serve:aborted", r"\bAborted request [\w-]{4,}", ("Aborted request",), "INFO 08-19 11:15:47 "
          "async_llm_engine.py:181] Aborted request chat-12fa08eea52d4308ab46efbdeb7a300a.", flags=0),
    _rule("client:read-timeout", r"Read timed out|\bReadTimeout(?:Error)?\b|\bread timeout\b",
          ("Read timed out", "ReadTimeout", "read timeout", "Read timeout"),
          "HTTPConnectionPool(host='192.168.1.12', port=8000): Read timed out.", flags=re.IGNORECASE),
    # The client could not reach the server at all: it is not listening (died, killed, still starting, another port).
    _rule("client:unreachable", r"Connection refused|APIConnectionError|Failed to establish a new connection|"
                                r"ConnectError\b|Cannot connect to host|Connection reset by peer|RemoteDisconnected",
          ("Connection refused", "APIConnectionError", "Failed to establish a new connection", "ConnectError",
           "Cannot connect to host", "Connection reset by peer", "RemoteDisconnected"),
          "requests.exceptions.ConnectionError: ... Failed to establish a new connection: [Errno 111] Connection refused",
          flags=0, states=True),
    # --- the phase, in the reporter's words (prose and CJK only) --------------------------------
    _rule("words:startup",
          r"\b(?:at|on|during) start(?:-?up)?\b|when (?:starting|launching)|while starting|(?:fails?|failed) to start|"
          r"won'?t start|cannot start|can't start|启动|"
          # the engine's initialisation, and the moment the server comes up ("right after the service started")
          r"\b(?:during|at|on|in) (?:the )?(?:vLLM |vllm |engine |model |server )?(?:initiali[sz]ation|init)\b|"
          r"right after (?:the )?(?:service|server|engine) (?:start(?:ed|s)?|launch(?:ed|es)?)|初始化",
          ("startup", "start-up", "start up", "at start", "on start", "during start", "when starting", "when launching",
           "while starting", "to start", "t start", "启动", "initiali", " init ", " init.", " init,", " init\n",
           "right after the serv", "right after serv", "right after the engine", "right after engine", "初始化"),
          "it fails during startup", prose=True),
    _rule("words:loading",
          r"(?:while|when|during) loading|loading (?:the )?(?:model|weights|checkpoint|shards)|加载模型|加载时|加载中|载入",
          ("loading", "加载模型", "加载时", "加载中", "载入"), "OOM while loading the model", prose=True),
    _rule("words:after-load",
          r"after (?:the )?(?:model|weights?|checkpoint) (?:is |are |was |were |has |have )?(?:been )?(?:fully )?"
          r"(?:load|finish)|after (?:it )?load(?:ing|ed|s)\b|(?:model|weights) (?:is |are |was |were )?loaded|"
          r"loads? (?:fine|ok|successfully)|加载完|加载成功|加载后|载入完",
          ("after the model", "after the weight", "after model", "after weight", "after loading", "after load",
           "after it load", "loaded", "loads fine", "load fine", "loads ok", "load ok", "loads success",
           "load success", "加载完", "加载成功", "加载后", "载入完"),
          "the OOM comes right after the weights load", prose=True),
    _rule("words:serving",
          r"\binference\b|\bserving\b|when (?:I |we )?send|send(?:ing)? (?:a |the |many |some )?requests?|"
          r"after (?:some|a) (?:time|while)|after (?:\d+|a few|several) (?:requests|minutes|hours)|during generation|"
          r"while generating|推理|请求|运行一段时间|运行时|运行中|生成时|服务中|服务期间",
          ("inference", " serving", "Serving", "when I send", "when we send", "when send", "send request", "sending request",
           "send a request", "sending a request", "send the request", "send many", "sending many", "send some",
           "after some time", "after a while", "requests", "minutes", "hours", "during generation", "while generating",
           "推理", "请求", "运行一段时间", "运行时", "运行中", "生成时", "服务中", "服务期间"),
          "it crashes after a while when we send requests", prose=True, exact_keywords=True),
    _rule("words:started-fine",
          r"start(?:s|ed)? (?:up )?(?:fine|ok|normally|successfully)|server (?:is |was )?up\b|启动成功|启动正常|正常启动",
          ("starts fine", "started fine", "start fine", "starts ok", "started ok", "start ok", "normally",
           "successfully", "server is up", "server was up", "server up", "启动成功", "启动正常", "正常启动"),
          "the server starts fine, then dies", prose=True),
    _rule("words:profile", r"\bprofil|dummy (?:run|inputs?|batch)|warm(?:ing)?[- ]?up|预热|显存分析",
          ("profil", "dummy", "warm", "预热", "显存分析"), "it fails in the profile run", prose=True),
    # every backend's graph capture (parsers/devices.py: CUDA graphs, HPU graphs, ACL graphs...)
    _rule("words:capture", _words_rx(devices.graph_words()), devices.graph_words(), "OOM while capturing CUDA graphs",
          prose=True),
    # Not "KV cache" alone: every throughput line says "GPU KV cache usage" (the prefilter would select them all).
    _rule("words:kv", r"kv[ _-]?cache|kv[ _-]?缓存|KV 缓存",
          ("kv cache", "kv-cache", "kvcache", "KVCache", "KV cache is", "KV cache was", "KV cache too", "the KV cache",
           "enough KV cache", "KV cache not", "KV cache size is", "KV cache for", "kv缓存", "KV缓存", "KV 缓存", "kv 缓存"),
          "the kv cache is too small for max_model_len", prose=True, exact_keywords=True),
    # every backend's device memory (parsers/devices.py: VRAM, 显存, HBM, NPU / HPU memory, a TPU's vmem)
    _rule("words:gpu-mem", _words_rx(devices.memory_words()), devices.memory_words(), "显存不足", prose=True),
    # Another tenant on the same device, in words: a second vLLM instance, another model or process sharing the GPU,
    # a model started after another on the same cards. Start-up then finds less free memory than it asks for
    # (startup-free-memory), or the profile counts the other tenant's memory as its own.
    _rule("words:coresident",
          r"\b(?:other|another|second|two|multiple|more than (?:one|1)) (?:vllm |vLLM )?(?:process(?:es)?|programs?|jobs?|"
          r"models?|containers?|instances?|tenants?|workloads?|stages?)\b[^.?!\n]{0,60}?\b(?:(?:the )?same|single|one|a "
          r"shared) (?:GPUs?|cards?|devices?|node)\b|"
          r"\b(?:other|another|second) (?:process(?:es)?|programs?|jobs?|models?|containers?|instances?)\b[^.?!\n]{0,40}?"
          r"(?:taking|using|occupying|holding|consuming|already uses?|running on)|"
          r"\b(?:share|sharing) (?:the |a |one |their )?(?:GPUs?|cards?|devices?)\b|\bshared (?:GPUs?|cards?|devices?)\b|"
          r"(?:其他|其它|另一个|别的|多个|两个)(?:vllm|vLLM)?(?:进程|程序|模型|任务|实例|服务).{0,12}?(?:占用|占了|使用|同一|共用)|"
          r"先启动了?.{0,80}?(?:然后|再|又)启动",
          # (what every match holds, not "other" / "second" / "share" alone: ordinary sentences hold those)
          ("process", "Process", "program", "instance", "Instance", "tenant", "container", "workload", "stage", "job",
           "other model", "another model", "Another model", "second model", "two models", "Two models", "multiple models",
           "share the", "share a", "share one", "share their", "share GPU", "share card", "share device", "sharing the",
           "sharing a", "sharing one", "sharing their", "sharing GPU", "Sharing the", "shared GPU", "shared card",
           "shared device", "其他", "其它", "另一个", "别的", "多个", "两个", "先启动"),
          "more than 1 vllm instance on a single GPU: the profile counts the other instance's memory", prose=True,
          exact_keywords=True),
    # vLLM's utilization setting named in a report's words (gpu_memory_utilization=1, "the 0.9 utilization"): what
    # the reporter fought with is how much of the card vLLM may take, the start-up check's and the KV budget's input.
    _rule("words:utilization", r"gpu[-_ ]memory[-_ ]utili[sz]ation|GPU_MEM_UTIL|gpu_util\b|显存利用率|显存占用比例",
          ("gpu_memory_utili", "gpu-memory-utili", "gpu memory utili", "GPU memory utili", "GPU_MEM_UTIL", "gpu_util",
           "显存利用率", "显存占用比例"), "cannot load llama 3.2 3b on a 16gb gpu when gpu_memory_utilisation=1",
          prose=True, exact_keywords=True),
    # --- who printed the log ---------------------------------------------------------------------
    _rule("comp:ray", r"\bray::|\(raylet\)|RayWorker|ray\.exceptions|\bRay\b|ray_distributed_executor|ray_utils",
          ("ray::", "raylet", "RayWorker", "ray.exceptions", "Ray ", "Ray:", "Ray'", "Ray.", "Ray,", "ray_distributed",
           "ray_utils"), "(RayWorkerWrapper pid=4242, ip=10.0.0.2) ERROR", flags=0),
    _rule("comp:kserve", r"kserve|InferenceService", ("kserve", "KServe", "Kserve", "InferenceService"),
          "kserve-container"),
    _rule("comp:gpustack", r"gpustack", ("gpustack", "GPUStack", "GpuStack"), "gpustack worker"),
    _rule("comp:llm-d", r"\bllm-d\b|llm_d\b", ("llm-d", "llm_d"), "llm-d modelservice"),
    _rule("comp:rl", r"\bverl\b|openrlhf|\brollout\b|\bGRPO\b|\bPPO\b|\bTRL\b",
          ("verl", "OpenRLHF", "openrlhf", "rollout", "GRPO", "PPO", "TRL"), "verl rollout worker"),
    # the backends other than CUDA, by the words that name them (parsers/devices.py)
    *(_rule(f"comp:{b.name}", "|".join(b.names), b.keywords, _BACKEND_EXAMPLES[b.name], flags=0)
      for b in devices.BACKENDS if b.names),
    _rule("comp:k8s", r"kubectl|\bpods?\b|kubelet|Kubernetes|\bk8s\b|\bcontainer\b",
          ("kubectl", "pod", "Pod", "kubelet", "Kubernetes", "kubernetes", "k8s", "container", "Container"),
          "the pod restarts"),
    # An application that calls the server (an LLM platform, a chat front end, an HTTP tool): a failure the reporter
    # places in it is the client's, not the server's (issue 16 item 5: a server that serves is healthy).
    _rule("comp:client-app", r"\b(?:" + "|".join(re.escape(a) for a in _CLIENT_APPS) + r")\b", _CLIENT_APPS,
          "when I add the model in Dify it reports an error", prose=True),
    # The reporter says the server itself serves ("the API calls work fine", "tested with Postman, it worked fine",
    # "successfully deployed", 服务正常): with a failure placed in a client, the server is not what failed.
    _rule("words:server-works", r"\b(?:" + "|".join(_WORKS) + r")\b|(?:服务|接口|调用|访问)\S{0,3}正常",
          tuple(w.replace("\\", "") for w in _WORKS) + ("正常",), "I tested the API locally using Postman, and it worked fine",
          prose=True),
    # --- the machine -------------------------------------------------------------------------------
    _rule("gpu:pre-ampere",
          r"\bV100\b|\bT4\b|\bP100\b|\bP40\b|\bTesla\b|RTX ?20[678]0|\bGTX\b|\bTitan\b|\bTuring\b|\bVolta\b|"
          r"compute capability (?:of )?[1-7]\.\d|capability [1-7]\.\d|sm_?7[05]\b",
          ("V100", "T4", "P100", "P40", "Tesla", "RTX 20", "RTX20", "GTX", "Titan", "TITAN", "Turing", "Volta",
           "capability", "sm_7", "sm7"), "Tesla V100-SXM2-32GB", flags=0),
    # Not "bf16" alone: request ids are hex ("chatcmpl-...0bf16a...").
    _rule("cfg:bf16", r"bfloat16|\bbf16\b", ("bfloat16", " bf16", "=bf16", "`bf16", "BFloat16", "Bfloat16", "BF16"),
          "Bfloat16 is only supported on GPUs with compute capability of at least 8.0", failure=True),
    _rule("cfg:custom-allreduce", r"custom[_ ]?all[_ -]?reduce|custom_ar\b|CustomAllreduce",
          ("ustom_all", "ustom all", "ustomAll", "custom_ar", "ustom_allreduce"), "custom_all_reduce.cuh:368 'invalid argument'", failure=True),
    _rule("cfg:remote-code", r"trust[_-]remote[_-]code", ("trust_remote_code", "trust-remote-code"),
          "Please pass the argument `trust_remote_code=True` to allow custom code to be run.", failure=True),
    _rule("cfg:tokenizer", r"tokenizer[_-]mode|MistralTokenizer|mistral_common|tekken|tokenizer\.json|tokenizer_config",
          ("tokenizer_mode", "tokenizer-mode", "MistralTokenizer", "mistral_common", "tekken", "tokenizer.json",
           "tokenizer_config"), "use --tokenizer-mode mistral", failure=True),
    _rule("cfg:hybrid", r"\bmamba\b|\bhybrid\b|linear[_ ]attention|Qwen3-Next|\bJamba\b|Nemotron-H|granite-4|state blocks",
          ("amba", "ybrid", "linear_attention", "linear attention", "Qwen3-Next", "Jamba", "Nemotron-H", "granite-4",
           "state blocks"), "Mamba cache blocks", failure=True),
    # --- a failure stated in words (anchors: a report that says something failed is never "none") -----
    _rule("fail:title", r"^\s*#*\s*\[(?:Bug|Usage|Issue|Error|Help|Installation|Question)\]\s*[:：]?",
          ("[Bug]", "[Usage]", "[Issue]", "[Error]", "[Help]", "[Installation]", "[Question]"),
          "[Bug]: vLLM crashes when loading Qwen3", prose=True, flags=0),
    _rule("fail:words",
          r"\b(?:errors?|fails?|failed|failing|failure|crash(?:es|ed|ing)?|exceptions?|killed|dies|died|freez(?:es|ing)|"
          r"hangs|stuck|unable to|won'?t (?:start|run|load|work)|does(?:n'?t| not) work)\b|报错|错误|失败|崩溃|挂掉|卡死|"
          r"被杀|异常|エラー|失敗|[\u3400-\u9fff]\s*kill|kill\s*[\u3400-\u9fff]",
          ("error", "Error", "fail", "Fail", "crash", "Crash", "xception", "killed", "Killed", "dies", "died", "freez",
           "hangs", "stuck", "unable to", "Unable to", "t start", "t run", "t load", "t work", "not work", "报错", "错误",
           "失败", "崩溃", "挂掉", "卡死", "被杀", "异常", "エラー", "失敗", "kill"),
          "it fails with an error when I start it", prose=True, negatable=True),
    _rule("fail:exception", r"\b[A-Z]\w*(?:Error|Exception)\b(?!\s*=)", ("Error", "Exception"),
          "> ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0", prose=True, flags=0),
    # --- words of a failure that bear on its class (prose, or an error record) ---------------------
    _rule("words:not-supported",
          r"not (?:yet |currently )?supported|unsupported|only supported|not compatible|incompatible|no kernel image|does(?:n'?t| not) "
          r"support|is not available (?:for|on)|不支持",
          ("supported", "Supported", "compatible", "no kernel image", "support", "not available", "不支持"),
          "The quantization method awq is not supported for the current GPU", failure=True, states=True),
    _rule("words:capability", r"compute capability|\bsm_\d{2,3}\b|Minimum capability|Current capability|"
                              r"architectures? (?:\w+ )?(?:is |are )?not|unsupported architecture",
          ("capability", "sm_", "rchitecture"), "Minimum capability: 75. Current capability: 70.", failure=True),
    _rule("words:quantization", r"quantiz|\bawq\b|\bgptq\b|\bgguf\b|\bnvfp4\b|\bmxfp4\b|bitsandbytes",
          ("quantiz", "Quantiz", "awq", "AWQ", "gptq", "GPTQ", "gguf", "GGUF", "nvfp4", "NVFP4", "mxfp4", "MXFP4",
           "bitsandbytes"), "Found unknown quantization", failure=True),
    _rule("words:divisible", r"divis(?:i)?ble by|not divis", ("divisible", "divisble", "not divis"),
          "the number of attention heads is not divisible by 3", failure=True, states=True),
    _rule("words:memory-growth",
          r"memory leak|\bleak(?:s|ing|age)?\b|内存泄[漏露]|泄[漏露]|(?:memory|RAM|RSS)(?: usage)?(?: keeps?)? "
          r"(?:grow|increas|climb|rise)|(?:内存|RAM).{0,6}(?:增长|上涨|一直涨|持续|不自动清理|不释放)|"
          # "CPU memory is used more and more", "the memory keeps getting exhausted", "will cause memory problem"
          r"more and more|memory (?:keeps? |kept )?(?:getting |being )?exhausted|memory (?:problems?|issues?)\b",
          ("leak", "Leak", "泄漏", "泄露", "memory grow", "memory increas", "memory keeps", "memory usage", "RAM grow",
           "RAM increas", "RAM keeps", "RSS grow", "RSS increas", "memory climb", "memory rise", "RAM usage",
           "增长", "上涨", "一直涨", "持续", "不自动清理", "不释放", "more and more", "memory exhausted",
           "memory getting", "memory being", "memory kept", "memory problem", "memory issue"),
          "the RAM usage keeps growing until the process is killed", failure=True, states=True),
    _rule("words:host-freeze",
          r"freez|reboot|unresponsive|power[- ]cycle|host (?:wedges|hangs)|system hangs|死机|重启|\bswap\b",
          ("freez", "reboot", "unresponsive", "power-cycle", "power cycle", "wedges", "system hangs", "死机", "重启",
           "swap"), "the whole host freezes and needs a reboot", failure=True, states=True),
    # Someone else (an old instance, a zombie worker) still holds the GPU: start-up finds its memory taken.
    _rule("words:gpu-held",
          r"(?:GPUs?|VRAM|GPU memory) (?:is |are |was |were )?still (?:occupied|in use|held|allocated|taken|busy)|"
          r"still (?:holds?|holding|occupies|occupying|using) (?:the )?(?:GPUs?|VRAM|GPU memory)|"
          r"(?:zombie|orphan(?:ed)?|leftover|stale) (?:vllm |python )?(?:process(?:es)?|workers?|instances?)|"
          r"(?:GPU|VRAM|GPU memory) (?:is|was|isn'?t|wasn'?t) (?:not )?(?:released|freed)|"
          r"(?:GPU|gpu|显存|显卡)\S{0,6}?(?:仍然|仍|还|一直|依然)\S{0,3}?占用|(?:GPU|gpu|显存|显卡)\S{0,12}?(?:没有|并没有|未)(?:得到|被)?释放",
          ("still occupied", "still in use", "still held", "still allocated", "still taken", "still busy", "still hold",
           "still occup", "still using", "zombie", "orphan", "leftover", "stale", "released", "freed", "占用", "释放"),
          "the GPU memory is still occupied by the old vLLM process after it crashed", failure=True, states=True),
    _rule("words:unified-memory", r"unified[- ]memory|\bGB10\b|DGX Spark|Jetson|\bOrin\b|Grace Hopper|\bGH200\b",
          ("nified memory", "nified-memory", "GB10", "DGX Spark", "Jetson", "Orin", "Grace Hopper", "GH200"),
          "128 GB unified memory on a DGX Spark (GB10)"),
    _rule("words:shm", r"/dev/shm|shm[-_]size|--ipc[= ]host", ("/dev/shm", "shm-size", "shm_size", "--ipc"),
          "System memory request exceeds memory available in /dev/shm", failure=True),
    # A process dying of SIGBUS: in a container, the signature of a /dev/shm too small for the workers' shared
    # memory (Docker's default is 64 MB); a failure on its own, in any line.
    _rule("host:sigbus", r"\bSIGBUS\b|\bBus error\b", ("SIGBUS", "Bus error", "bus error"),
          "Fatal Python error: Bus error", states=True, flags=0),
    _rule("words:timeout", r"timed out|\btimeout\b|TimeoutError|超时", ("timed out", "timeout", "Timeout", "超时"),
          "RPC call to sample_tokens timed out", failure=True, states=True),
    _rule("words:placement", r"placement[ _]group|ray status|resource (?:request|demand)|\bray start\b|pending nodes",
          ("placement", "ray status", "resource request", "resource demand", "ray start", "pending nodes"),
          "waiting for the placement group", failure=True, states=True),
    # every backend's collective library and the operations a parallel group runs (parsers/devices.py)
    _rule("words:collective", _words_rx(devices.collective_libraries() + devices.COLLECTIVE_OPS),
          devices.collective_libraries() + devices.COLLECTIVE_OPS, "NCCL all_reduce hangs across two nodes",
          failure=True),
    # A memory said to run short, by its name in the device table: the host's (/dev/shm, pinned, system memory) or a
    # device's (VRAM, HBM, NPU memory, a TPU's vmem), in an error record or in words.
    *(_rule(f"mem:{where}-short", _short_rx(words), words, example, failure=True, states=True)
      for where, words, example in (("host", devices.HOST_MEMORY, "RuntimeError: Insufficient space in /dev/shm: "
                                     "4095/4096 MiB required, 1405 MiB free"),
                                    ("device", devices.memory_words(), "the HPU memory is exhausted during warm-up"))),
    # A collective that failed (timed out, hung, a rank gone) in an error record or in words: the parallel group's
    # communication failed, whichever library (HCCL, gloo, NCCL) and whether or not its own error line was pasted.
    _rule("coll:failure", rf"(?:{_words_rx(devices.COLLECTIVE_OPS)})[^\n]{{0,120}}?{_COLL_FAILED}|"
                          rf"{_COLL_FAILED}[^\n]{{0,60}}?(?:{_words_rx(devices.COLLECTIVE_OPS)})",
          devices.COLLECTIVE_OPS, "the all_reduce in the TP group timed out after 1800 s", failure=True, states=True),
    # A communication library's environment variable (NCCL_P2P_DISABLE=1, NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME):
    # in any line, a launch's or a reporter's. With a hang or a failure, the parallel group's transport is suspect.
    _rule("coll:env", r"\b(?:" + "|".join(devices.COMM_ENV_PREFIXES) + r")[A-Z0-9_]{2,40}", devices.COMM_ENV_PREFIXES,
          "export NCCL_P2P_DISABLE=1", flags=0),
    # A process that stops making progress, said in words (not an error line): with more than one rank (TP / PP,
    # several nodes) the ranks are waiting on each other in a collective (features.py: coll:hang).
    _rule("words:hang", r"\bhang(?:s|ing)?\b|\bhung\b|\bstuck\b|\bstall(?:s|ed|ing)?\b|no progress|"
                        r"停滞|卡住|卡在|卡死|挂起|无响应|没有响应|不动了",
          ("hang", "Hang", "hangs", "Hangs", "hanging", "Hanging", "hung", "stuck", "Stuck", "stall", "Stall",
           "no progress", "停滞", "卡住", "卡在", "卡死", "挂起", "无响应", "没有响应", "不动了"), "it hangs when tensor-parallel-size is 2", failure=True, negatable=True),
    # More than one rank, in words: a tensor- or pipeline-parallel size above 1, several nodes or GPUs working as one.
    _rule("words:multi-rank",
          r"(?:[Tt]ensor|[Pp]ipeline)[-_ ]parallel[-_ ]size\s*(?:>\s*1\b|(?:[=:]|of|is)?\s*(?:[2-9]|\d\d))|"
          r"\b(?:tp|TP|pp|PP)(?:>1\b|[=>](?:[2-9]|\d\d))|\b(?:tp|TP|pp|PP)[-_ ]size\s?[=:>]?\s?(?:[2-9]|\d\d)|"
          r"\bTP ?(?:[2-9]|1[0-9])\b|[Mm]ulti-?(?:node|GPU|gpu)|\b(?:[2-9]|\d\d) nodes\b|"
          r"多卡|多机|多节点|多个(?:计算)?节点|双卡|双机|(?:两|二|[2-9])(?:张卡|个GPU|块卡|台|个节点)",
          ("parallel-size", "parallel_size", "parallel size", "tp=", "TP=", "pp=", "PP=", "tp>", "TP>", "pp>", "PP>",
           "tp-size", "tp_size", "tp size", "TP-size", "TP_size", "TP size", "pp-size", "pp_size", "pp size", "PP size",
           *(f"TP{d}" for d in "123456789"), *(f"TP {d}" for d in "123456789"), "ulti-node", "ultinode", "ulti-GPU",
           "ulti-gpu", "ultiGPU", "ultigpu", *(f"{d} nodes" for d in "0123456789"), "多卡", "多机", "多节点", "多个计算节点",
           "双卡", "双机", "张卡", "个GPU", "块卡", *(f"{d}台" for d in "两二23456789"), "个节点"),
          "vllm serve ... --tensor-parallel-size 4 hangs", failure=True, flags=0),
    _rule("words:illegal-access", r"illegal (?:memory|instruction|address|CUDA access)|device-side assert|misaligned",
          ("illegal", "Illegal", "device-side", "misaligned"), "Illegal memory access in flash_attn", failure=True, states=True),
    _rule("words:template", r"chat[_ ]template|jinja|--chat-template|default template", ("chat template", "chat_template",
                                                                                       "Chat template", "jinja", "Jinja",
                                                                                       "default template"),
          "Unable to use default template", failure=True),
    _rule("words:import", r"No module named|ModuleNotFoundError|ImportError|pip install|not installed|cannot import|"
                          r"\bvllm\[[a-z_,-]{2,40}\]|can'?t import|unable to import|failed to import|undefined symbol",
          ("No module", "ModuleNotFound", "ImportError", "pip install", "not installed", "cannot import", "vllm[",
           "t import", "to import", "undefined symbol"),
          "ModuleNotFoundError: No module named 'flash_attn'", failure=True, states=True),
    _rule("words:argument", r"unrecognized arguments?|invalid choice|error:? argument|unexpected keyword|"
                            r"invalid loads value|ambiguous option",
          ("unrecognized argument", "invalid choice", "error: argument", "error argument", "unexpected keyword",
           "invalid loads value", "ambiguous option"), "api_server.py error argument --foo invalid loads value",
          failure=True, states=True),
    _rule("words:context-length", r"max[_-]model[_-]len|max_position_embeddings|context (?:length|window)|"
                                  r"maximum (?:model|sequence) length|max seq len|上下文长度",
          ("max_model_len", "max-model-len", "max_position", "context length", "context window", "maximum model length",
           "maximum sequence length", "max seq len", "上下文长度"), "max_model_len is larger than the context length",
          failure=True),
    _rule("words:limit-exceeded", r"is greater than (?:the )?max_|cannot be higher than|exceeds the pre-allocated|"
                                  r"must be (?:less|lower|smaller) than|is too (?:large|big|high)",
          ("is greater than", "cannot be higher", "exceeds the pre-allocated", "must be less", "must be lower",
           "must be smaller", "is too large", "is too big", "is too high"),
          "LoRA rank 64 is greater than max_lora_rank 16", failure=True),
)


# --- the flag the report itself suggests (not scored: the fix choice reads them, diagnose/fixes.py) ------------
# "set --max-num-seqs=256", "decreasing swap_space helps", vLLM's own "Try increasing `gpu_memory_utilization`",
# "调小 max_num_seqs": a flag named with a verb of change before it, or with "helps / fixed / works" after it.
SUGGESTION_PREFIX = "suggest:"
SUGGESTABLE_FLAGS: tuple[str, ...] = (
    "max-num-seqs", "max-num-batched-tokens", "max-model-len", "gpu-memory-utilization", "enforce-eager",
    "tensor-parallel-size", "cpu-offload-gb", "swap-space", "kv-cache-dtype", "enable-chunked-prefill",
    "limit-mm-per-prompt", "disable-custom-all-reduce", "max-cudagraph-capture-size", "mm-processor-kwargs")
_CHANGE_VERBS = (r"(?:(?<![-_])\b(?:set(?:ting)?|lower(?:ing|ed)?|reduc(?:e|ed|ing)|decreas(?:e|ed|ing)|increas(?:e|ed|ing)|"
                 r"rais(?:e|ed|ing)|tr(?:y|ied|ying)|us(?:e|ed|ing)|add(?:ed|ing)?|pass(?:ed|ing)?|cap(?:ped|ping)?|"
                 r"limit(?:ed|ing)?|adjust(?:ed|ing)?|chang(?:e|ed|ing)|specify(?:ing)?|disabl(?:e|ed|ing)|"
                 r"enabl(?:e|ed|ing)|missing|without|scal(?:e|es|ing) with|sized by|depends? on)\b|"
                 r"调小|调低|减小|降低|设置|设为|加上|改成|调整)")
_HELPED = r"(?:\bhelp(?:s|ed)?\b|\bis(?:n't| not) (?:explicitly )?set\b|\bfix(?:es|ed)?\b|\bsolv(?:es|ed)\b|\bwork(?:s|ed)\b|\bresolv(?:es|ed)\b|解决|就好|可以了)"


def _suggestion(flag: str) -> CueRule:
    words = flag.split("-")
    name = r"[-_ ]".join(words)
    keywords = tuple(dict.fromkeys(sep.join(words) for sep in ("-", "_", " ")))
    return _rule(SUGGESTION_PREFIX + flag, rf"{_CHANGE_VERBS}[^.\n]{{0,30}}?{name}|{name}[^.\n]{{0,50}}?{_HELPED}",
                 keywords, f"setting --{flag} lower fixed it", failure=True)


TABLE += tuple(_suggestion(f) for f in SUGGESTABLE_FLAGS)

# --- the model and the GPU, in the reporter's words (not scored: diagnose/context.py reads them) --------------
# "Llama 3 70B on a single 80GB GPU", "a Qwen2.5-7B on my RTX 4090": when no --model / --gpu and no log line says
# so, the weights estimate (ctx:weights-*) can still compare the two. Only names long enough not to select
# ordinary serving lines (no "L4", "T4": the prefilter would pass every line holding them).
MENTION_PREFIX = "mention:"
_GPU_NAMES = ("A100", "A800", "H100", "H800", "H200", "B200", "GB200", "L40S", "L40", "V100", "A6000", "RTX", "MI300",
              "MI250", "MI210", "MI355")
_MODEL_FAMILIES = ("Llama", "llama", "LLaMA", "Qwen", "qwen", "QwQ", "Mistral", "mistral", "Mixtral", "mixtral",
                   "DeepSeek", "deepseek", "Deepseek", "Gemma", "gemma", "GLM", "glm", "Yi-", "InternLM", "internlm",
                   "Baichuan", "baichuan", "Falcon", "falcon", "Phi-", "phi-")
TABLE += (
    _rule("mention:gpu", r"(?:" + "|".join(_GPU_NAMES) + r")(?:[ -]?\d{1,3} ?GB\b|[ -]?(?:SXM\d?|PCIe|NVL|Ti|SUPER|Laptop)\b|[ -]?[A-Z]?\d{2,4}[A-Z]?\b){0,4}|"
          r"\b\d{1,3} ?GB (?:GPU|card|VRAM)|"
          r"\b\d{1,3} ?G显存|显存\s?\d{1,3} ?G",
          _GPU_NAMES + ("GB GPU", "GB card", "GB VRAM", "G显存", "显存"), "loading it on a single A100 80GB", prose=True,
          flags=0),
    _rule("mention:model", r"(?:" + "|".join(re.escape(f) for f in _MODEL_FAMILIES) +
          r")[\w.\- ]{0,25}?\d+(?:\.\d+)?\s?[bB](?![a-zA-Z])[\w.\-]{0,24}",
          _MODEL_FAMILIES, "trying to load Llama 3 70B", prose=True, flags=0),
)
# The cue names, one definition: the feature names of TABLE. Code outside the parsers that tests a cue (the fix
# builders) names it through ``cue_name``, so a renamed or removed cue fails at import instead of silently never
# matching (tests/unit/diagnose/test_diagnose_cue_names.py checks the fix modules' literals as well).
CUE_NAMES: frozenset[str] = frozenset(r.feature for r in TABLE)


def cue_name(name: str) -> str:
    """``name``, checked to be a cue of TABLE (KeyError otherwise); a combination ``a+b`` checks both parts."""
    missing = [part for part in name.split("+") if part not in CUE_NAMES]
    if missing:
        raise KeyError(f"no cue named {', '.join(map(repr, missing))} in diagnose/parsers/cues.py TABLE")
    return name


# Cue kinds that are read by other parts (the fix choice, the context), never weighed by the scorer.
UNSCORED_PREFIXES = (SUGGESTION_PREFIX, MENTION_PREFIX)

_CJK = lazy_re.compile(r"[\u3400-\u9fff]")
# Words of a failure (counted only in prose or error records): on an error record they state a failure.
FAILURE_WORDS: frozenset[str] = frozenset(r.feature for r in TABLE if r.failure and r.feature.startswith("words:"))
# Words that state a failure on their own, in prose as on an error record: anchors (features.extract).
FAILURE_STATEMENTS: frozenset[str] = frozenset(r.feature for r in TABLE if r.states)
# A rule matched ignoring case has its keywords matched ignoring case too (people write "CPU Memory", "System
# Memory", "OOM While Loading"): the prefilter's caseless list gets them lower-cased. Only keywords of at least
# CASELESS_MIN characters: short ones ("RAM" -> "ram") would match inside ordinary words ("params", "program")
# and select every request line; they stay as written.
CASELESS_MIN = 6


def _caseless(rule: CueRule, keyword: bytes) -> bool:
    return (bool(rule.pattern.flags & re.IGNORECASE) and not rule.exact_keywords and len(keyword) >= CASELESS_MIN
            and keyword.isascii())


# Every keyword of every rule (and of vLLM's message fragments), for the prefilter's table (diagnose/prefilter.py).
# Spellings the error parsers accept (they compare case-insensitively) that the prefilter's own list lacks.
_CASE_VARIANTS: tuple[bytes, ...] = (b"OUT OF MEMORY", b"Out Of Memory", b"Out of Memory", b"out of Memory")
# Lines other parsers read that no keyword of the prefilter's own list covers (kept here, next to the cue table):
# vllm-ascend's KV budget line (memory.py), c10d's store timeouts (environment.py), logfmt records (parsers.feed),
# an ImportError's "undefined symbol" said in words.
# Ray Serve's ready lines, the API server's route list, its answers to GET /v1/... and completions' JSON bodies
# (identity.py), V0's dead-engine line, Ascend's HCCL error codes (environment.py), versions pinned in words.
PARSER_KEYWORDS: tuple[bytes, ...] = (b"total memory: ", b"[c10d]", b"TCPStore", b"level=error", b"level=info",
                                      b"undefined symbol", b"driver on your system is too old", b"' is ready at http",
                                      b"Deployed app '", b"Background loop has errored", b"is already dead", b"EI0",
                                      b"EI1", b"EI9", b"HCCL", b"RCCL", b"hccl", b"RESOURCE_EXHAUSTED", b"Route: /v1/",
                                      b'"GET /v1/', b'"GET /models', b'"object":"chat.completion', b'"object": "chat.completion',
                                      b'"object":"text_completion', b'"object": "text_completion',
                                      # a version pinned in words ("vLLM==0.4.0+cu118"): identity.py's version patterns
                                      b"vLLM=", b"VLLM=")
KEYWORDS: tuple[bytes, ...] = tuple(dict.fromkeys([k for r in TABLE for k in r.keywords if not _caseless(r, k)]
                                                  + list(FRAGMENT_KEYWORDS) + list(_CASE_VARIANTS)
                                                  + list(PARSER_KEYWORDS)))
CASELESS_KEYWORDS: tuple[bytes, ...] = tuple(dict.fromkeys(k.lower() for r in TABLE for k in r.keywords
                                                           if _caseless(r, k)))
# A rule is tried only on a line holding one of its keywords: one combined search per line finds them,
# and the prefilter (which has the same keywords) can never drop a line a rule would match.
_RULES_BY_KEYWORD: dict[str, tuple[CueRule, ...]] = {}
for _r in TABLE:
    for _k in _r.keywords:
        _key = _k.decode().lower() if _caseless(_r, _k) else _k.decode()
        _RULES_BY_KEYWORD[_key] = _RULES_BY_KEYWORD.get(_key, ()) + (_r,)
_EXACT = sorted((k for k in _RULES_BY_KEYWORD if k.encode() not in CASELESS_KEYWORDS or k != k.lower()),
                key=len, reverse=True)


# The keywords of each search (the exact one and the caseless one find their own), for _rules_for.
_KEY_GROUPS: dict[str, frozenset[str]] = {}
_RULES_SEEN: dict[str, tuple[CueRule, ...]] = {}


def _rules_for(keyword: str, caseless: bool) -> tuple[CueRule, ...]:
    """The rules a keyword the search found lets through: its own, and those of the keywords inside it. The combined
    search returns the longest keyword at a position ("memory leak", "hangs", "OOMKilled"), never the shorter ones it
    holds ("leak", "hang", "OOM"), so a rule keyed on the shorter one would never see such a line. Worked out once per
    keyword a log holds (a few dozen), not for the whole table at import."""
    key = ("~" if caseless else "=") + keyword
    found = _RULES_SEEN.get(key)
    if found is None:
        group = _KEY_GROUPS.get(key[0])
        if group is None:
            group = _KEY_GROUPS[key[0]] = frozenset(k.decode() for k in CASELESS_KEYWORDS) if caseless \
                else frozenset(_EXACT)
        found = _RULES_BY_KEYWORD.get(keyword, ())
        inner = {keyword[i:j] for i in range(len(keyword)) for j in range(i + 1, len(keyword) + 1)} & group
        inner.discard(keyword)
        for k in sorted(inner):
            found += tuple(r for r in _RULES_BY_KEYWORD.get(k, ()) if r not in found)
        _RULES_SEEN[key] = found
    return found


# Trie-shaped (diagnose/trie.py): the same matches as the flat alternations longest first, ten times faster a line.
_KEYWORD_RX = lazy_re.compile(alternation(_EXACT))
_CASELESS_RX = lazy_re.compile(alternation([k.decode() for k in CASELESS_KEYWORDS]), re.IGNORECASE)


# A failure word said not to have happened: "no errors", "without error", "never crashed", "0 failed",
# "无报错 / 没有报错 / 未报错" before it; a zero count after it ("Failed requests: 0", "errors=0": a benchmark's
# or a health check's summary). Hex ("error 0x1f") and decimals are not a zero count.
_NEGATION_BEFORE = lazy_re.compile(r"(?:\b(?:no|without|zero|never|not any|0)\s+(?:\w+\s+)?|(?:无|没有|没|未|不|零))$", re.IGNORECASE)
_ZERO_AFTER = lazy_re.compile(r"^\s*(?:[A-Za-z]+\s*)?[:：=]?\s*0(?![\w.,])")


def negated(msg: str, m: re.Match[str]) -> bool:
    """True when the failure word ``m`` is negated or counted as zero (see _NEGATION_BEFORE / _ZERO_AFTER)."""
    return (_NEGATION_BEFORE.search(msg[max(0, m.start() - 20):m.start()]) is not None
            or _ZERO_AFTER.match(msg[m.end():m.end() + 64]) is not None)


def parse_cues(line: LogLine, col: Collector) -> None:
    """Record every report cue the line carries (first occurrence per feature, and a count)."""
    if line.kernel:
        col.note_cue("comp:kernel", line)
        return
    msg = line.message
    # "\n": keywords that end a line (the prefilter sees it too)
    found = [(k, False) for k in _KEYWORD_RX.findall(msg + "\n")] + [
        (k.lower(), True) for k in _CASELESS_RX.findall(msg + "\n")]
    if not found:
        return
    words = line.prose or _CJK.search(msg) is not None
    error = line.level in ("ERROR", "CRITICAL") or error_record(msg)
    failure = words or error
    # The interpreter's own message (a TypeError's "unsupported operand type(s)", "got an unexpected keyword
    # argument"): its words are Python's, not a statement about the configuration (parsers/frames.PYTHON_MESSAGE).
    interpreter = error and PYTHON_MESSAGE.search(msg) is not None
    tried: set[str] = set()
    for keyword, caseless in found:
        for rule in _rules_for(keyword, caseless):
            if rule.feature in tried or (rule.prose and not words) or (rule.failure and not failure):
                continue
            if interpreter and rule.feature.startswith("words:"):
                continue
            tried.add(rule.feature)
            if any(not (rule.negatable and negated(msg, m)) for m in rule.pattern.finditer(msg)):
                col.note_cue(rule.feature, line, error=error)
