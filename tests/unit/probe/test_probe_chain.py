"""Stage 1 against a vLLM-shaped mock transport: every link, its verdict and its fix."""

from __future__ import annotations

import asyncio

from probe_fakes import FakeVllm

from oomguard.probe.chain import Chain
from oomguard.probe.classes import ProbeClass, Severity
from oomguard.probe.client import ProbeClient, normalize_base_url


def run_chain(fake: FakeVllm, url: str = "http://127.0.0.1:8000", *, key=None, model=None, claimed=None, env=None):
    u = normalize_base_url(url)

    def make(trust_env: bool) -> ProbeClient:
        return ProbeClient(u, key, transport=fake.transport(), trust_env=trust_env)

    async def go():
        chain = Chain(u, make, api_key=key, model=model, claimed_max_model_len=claimed, env=env or {}, container=False, timeout_s=5)
        out, client = await chain.run()
        await client.aclose()
        return out

    return asyncio.run(go())


def checks(out) -> dict:
    return {c.check: c for c in out.checks}


def test_healthy_server_passes_every_check():
    out = run_chain(FakeVllm(metrics="vllm:num_requests_running 0\n"))
    c = checks(out)
    assert [x.check for x in out.checks] == [
        "base-url", "reachable", "health", "auth", "models", "max-model-len", "completion", "chat",
        "stream", "error-404", "error-400", "tokenize", "metrics",
    ]
    assert all(x.ok for x in out.checks), [x.to_json() for x in out.checks if not x.ok]
    assert out.model == "tiny" and out.served_max_model_len == 1024
    assert out.tokenize_ok and out.metrics_ok and not out.blocking
    assert "usage in the final chunk" in c["stream"].detail


def test_wrong_model_suggests_the_served_name():
    out = run_chain(FakeVllm(), model="tinny")
    c = checks(out)["models"]
    assert not c.ok and c.cls is ProbeClass.MODEL_NOT_FOUND
    assert "--served-model-name tiny" in c.fix
    assert out.blocking


def test_model_path_instead_of_served_name():
    out = run_chain(FakeVllm(served="qwen3-27b", root="/data/models/qwen3-27b-w4a16"), model="/data/models/qwen3-27b-w4a16")
    c = checks(out)["models"]
    assert c.cls is ProbeClass.MODEL_NOT_FOUND
    assert "served-model-name" in c.detail and "--served-model-name qwen3-27b" in c.fix


def test_missing_key_on_a_keyed_server():
    out = run_chain(FakeVllm(api_key="s3cret-value"))
    c = checks(out)["auth"]
    assert not c.ok and c.cls is ProbeClass.AUTH and "--api-key" in c.detail
    assert "--api-key-env" in c.fix
    assert out.stopped


def test_wrong_key_is_named_but_not_shown():
    out = run_chain(FakeVllm(api_key="s3cret-value"), key="wrong-value-1")
    c = checks(out)["auth"]
    assert c.cls is ProbeClass.AUTH and "refused" in c.detail
    assert "wrong-value-1" not in c.detail + (c.fix or "")


def test_key_with_whitespace_stops_before_any_request():
    fake = FakeVllm(api_key="s3cret-value")
    out = run_chain(fake, key="s3cret-value\n")
    assert out.checks[0].check == "auth" and out.checks[0].cls is ProbeClass.AUTH
    assert "whitespace" in out.checks[0].detail
    assert fake.seen == []


def test_right_key_passes():
    out = run_chain(FakeVllm(api_key="s3cret-value"), key="s3cret-value")
    assert checks(out)["auth"].ok and not out.blocking


def test_doubled_v1_fails_but_the_chain_reports_the_rest():
    out = run_chain(FakeVllm(), url="http://127.0.0.1:8000/v1/v1")
    c = checks(out)
    assert c["base-url"].cls is ProbeClass.BAD_URL and "twice" in c["base-url"].detail
    assert "HTTP 404" in c["base-url"].detail  # shown on a real request
    assert c["base-url"].fix.endswith("base_url='http://127.0.0.1:8000/v1')")
    assert c["completion"].ok
    assert out.blocking


def test_claimed_context_above_served_is_a_continuing_failure():
    out = run_chain(FakeVllm(max_model_len=1024), claimed=4096)
    c = checks(out)["max-model-len"]
    assert not c.ok and c.cls is ProbeClass.CONTEXT_TOO_LONG and c.severity is Severity.FAIL_CONTINUE
    assert not out.blocking  # stage 2 runs and shows the 400 on a real request


def test_missing_chat_template_is_a_warning():
    out = run_chain(FakeVllm(chat_template=False))
    c = checks(out)["chat"]
    assert not c.ok and c.severity is Severity.WARN and "--chat-template" in c.fix
    assert not c.failed and not out.blocking


def test_stream_without_done_is_broken_and_blocks():
    out = run_chain(FakeVllm(stream_body='data: {"choices":[{"text":"a"}]}\n\n'))
    c = checks(out)["stream"]
    assert c.cls is ProbeClass.STREAM_BROKEN and "non-streaming works" in c.fix
    assert out.blocking


def test_stream_without_usage_warns():
    out = run_chain(FakeVllm(stream_body='data: {"choices":[{"text":"a"}]}\n\ndata: [DONE]\n\n'))
    c = checks(out)["stream"]
    assert c.ok and c.severity is Severity.WARN


def test_no_tokenize_and_no_metrics_are_warnings():
    out = run_chain(FakeVllm(tokenize=False, metrics=None))
    c = checks(out)
    assert not c["tokenize"].ok and c["tokenize"].severity is Severity.WARN
    assert not c["metrics"].ok and not out.tokenize_ok and not out.metrics_ok
    assert not out.blocking


def test_proxy_in_the_way_is_detected_and_bypassed():
    fake = FakeVllm()

    def make_factory(u):
        def make(trust_env: bool) -> ProbeClient:
            if trust_env:  # "through the proxy": the proxy answers 502 for everything
                import httpx

                return ProbeClient(u, None, transport=httpx.MockTransport(lambda r: httpx.Response(502, text="Bad Gateway")))
            return ProbeClient(u, None, transport=fake.transport(), trust_env=False)

        return make

    u = normalize_base_url("http://10.1.2.3:8000")

    async def go():
        chain = Chain(u, make_factory(u), api_key=None, model=None, claimed_max_model_len=None,
                      env={"HTTP_PROXY": "http://user:pw@proxy:3128"}, container=False, timeout_s=5)
        out, client = await chain.run()
        await client.aclose()
        return out

    out = asyncio.run(go())
    c = checks(out)
    assert c["proxy"].cls is ProbeClass.UNREACHABLE and c["proxy"].severity is Severity.FAIL_CONTINUE
    assert "NO_PROXY=10.1.2.3" in c["proxy"].fix
    assert "pw" not in c["proxy"].detail  # proxy credentials are not echoed
    assert c["completion"].ok and out.trust_env is False
