"""Phase hints in words people write around an error ("OOM during warmup", "when handling requests").

Pasted reports often carry no log prefix and no traceback, only a sentence. The
words in it still say when the failure happened; these hints are weaker
evidence than a phase marker or a traceback frame and are used only when
neither is present.
"""

from __future__ import annotations

import re
import oomguard.lazy_re as lazy_re

_HINTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("sampler", lazy_re.compile(r"\bsampler\b|dummy requests|采样器", re.IGNORECASE)),
    ("capture", lazy_re.compile(r"captur|cuda ?graph|cudagraph|图捕获|捕获", re.IGNORECASE)),
    ("warmup", lazy_re.compile(r"warm[- ]?up|warming|预热", re.IGNORECASE)),
    ("profile", lazy_re.compile(r"profil|dummy (?:run|input)|determine_num_available_blocks|显存分析|性能分析", re.IGNORECASE)),
    ("loading", lazy_re.compile(
        r"\bload(?:ing)?\b(?! test)|weights? (?:do not|don't) fit|loading weights|加载|载入|权重", re.IGNORECASE)),
    ("serving", lazy_re.compile(
        r"\brequests?\b|\binference\b|\bserving\b|under load|load test|\bgenerating\b|during generation|"
        r"\bgenerate\(|long prompts?|concurren|\bbatch(?:es)? of\b|first (?:prompt|request)|"
        r"推理|请求|并发|生成|压测|运行一段时间|运行时|运行中|撑爆|服务(?:中|期间)",
        re.IGNORECASE)),
    ("multimodal", lazy_re.compile(r"\bimages?\b|vision|multimodal|multi-modal|\bvideo\b|encoder|图片|图像|多模态|视频",
                              re.IGNORECASE)),
)


_WORD = lazy_re.compile(r"[A-Za-z][a-z]{1,14}|[A-Z]{2,6}s?|[\d.,]+[a-zA-Z%]{0,4}")


def looks_like_words(text: str) -> bool:
    """True for a sentence people wrote; False for random or binary-ish text that happens to contain "OOM"."""
    tokens = [t for t in text.split() if any(ch.isalnum() for ch in t)]
    if len(tokens) < 3:
        return False
    wordlike = sum(1 for t in tokens if _WORD.fullmatch(t.strip(".,:;!?()[]`*'\"")))
    return wordlike >= 0.4 * len(tokens)


# PyTorch's OOM message names CUDA graphs in every OOM since 2.1 ("allocated in private pools (e.g., CUDA
# Graphs)"): boilerplate, not a phase.
_TORCH_BOILERPLATE = lazy_re.compile(r"private pools \(e\.g\., CUDA\s*Gra\s*phs\)|PYTORCH_CUDA_ALLOC_CONF\S*|"
                                r"max_split_size_mb|Memory Management", re.IGNORECASE)


def phase_hints(text: str) -> frozenset[str]:
    text = _TORCH_BOILERPLATE.sub(" ", text)
    return frozenset(name for name, rx in _HINTS if rx.search(text))
