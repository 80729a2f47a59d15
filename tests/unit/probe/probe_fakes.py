"""Test doubles for the probe: a vLLM-shaped ``httpx.MockTransport`` and a fake NVML module.

The transport answers the way vLLM 0.32 does (error bodies, 401 text, SSE
framing) so the chain's logic is tested without sockets. The fake NVML module
carries values recorded from an 8 x RTX 3090 host (S2); real NVML is not
exercised anywhere in this suite (this machine has no NVIDIA driver).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import httpx

MiB = 1 << 20


@dataclass
class FakeVllm:
    served: str = "tiny"
    root: str = "/models/tiny"
    max_model_len: int = 1024
    api_key: str | None = None
    chat_template: bool = True
    stream_body: str | None = None  # override the SSE body of every stream
    tokenize: bool = True
    metrics: str | None = None
    seen: list[httpx.Request] = field(default_factory=list)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        path = request.url.path
        if self.api_key is not None and path.startswith("/v1"):
            if request.headers.get("authorization") != f"Bearer {self.api_key}":
                return httpx.Response(401, json={"error": "Unauthorized"})
        if path == "/health":
            return httpx.Response(200)
        if path == "/metrics":
            if self.metrics is None:
                return httpx.Response(404, json={"detail": "Not Found"})
            return httpx.Response(200, text=self.metrics, headers={"content-type": "text/plain"})
        if path == "/v1/models":
            return httpx.Response(
                200,
                json={"object": "list", "data": [{"id": self.served, "root": self.root, "max_model_len": self.max_model_len}]},
            )
        if path == "/tokenize":
            if not self.tokenize:
                return httpx.Response(404, json={"detail": "Not Found"})
            words = json.loads(request.content)["prompt"].split()
            return httpx.Response(200, json={"count": len(words), "max_model_len": self.max_model_len, "tokens": [10 + len(w) for w in words]})
        if path in ("/v1/completions", "/v1/chat/completions"):
            body = json.loads(request.content)
            if body.get("model") != self.served:
                return _error(404, f"The model `{body.get('model')}` does not exist. Valid aliases: {self.served}.", "NotFoundError")
            if int(body.get("max_tokens", 16)) > self.max_model_len:
                return _error(400, f"max_tokens={body['max_tokens']} cannot be greater than max_model_len={self.max_model_len}.")
            if path.endswith("chat/completions") and not self.chat_template:
                return _error(
                    400,
                    "As of transformers v4.44, default chat template is no longer allowed, so you must provide "
                    "a chat template if the tokenizer does not define one.",
                )
            if body.get("stream"):
                text = self.stream_body if self.stream_body is not None else _good_stream()
                return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})
            if path.endswith("chat/completions"):
                choice = {"index": 0, "message": {"role": "assistant", "content": "hi"}}
            else:
                choice = {"index": 0, "text": "hi"}
            return httpx.Response(200, json={"choices": [choice], "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
        return httpx.Response(404, json={"detail": "Not Found"})


def _error(status: int, message: str, typ: str = "BadRequestError") -> httpx.Response:
    return httpx.Response(status, json={"error": {"message": message, "type": typ, "param": None, "code": status}})


def _good_stream(n: int = 3) -> str:
    parts = [f'data: {{"choices": [{{"index": 0, "text": "t{i}"}}]}}\n\n' for i in range(n)]
    parts.append('data: {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": %d}}\n\n' % n)
    parts.append("data: [DONE]\n\n")
    return "".join(parts)


# -- a fake pynvml ------------------------------------------------------------------

# Recorded on S2's kind of host: RTX 3090, 24 GiB, a vLLM worker holding 19.6 GiB.
RECORDED_3090 = {
    "name": b"NVIDIA GeForce RTX 3090",
    "total": 25769803776,
    "used": 21045116928,
    "util": 87,
    "procs": [(4242, 20552089600), (999, 262144000)],
}


class FakeNvml:
    """The subset of ``pynvml`` that NvmlSampler calls, answering recorded values."""

    def __init__(self, gpus: list[dict[str, Any]], fail_util: bool = False):
        self.gpus = gpus
        self.fail_util = fail_util
        self.inited = False
        self.shutdown = False

    def nvmlInit(self) -> None:
        self.inited = True

    def nvmlShutdown(self) -> None:
        self.shutdown = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> Any:
        return self.gpus[h]["name"]

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        g = self.gpus[h]
        return SimpleNamespace(total=g["total"], used=g["used"], free=g["total"] - g["used"])

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        if self.fail_util:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return SimpleNamespace(gpu=self.gpus[h]["util"], memory=0)

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self.gpus[h]["procs"]]
