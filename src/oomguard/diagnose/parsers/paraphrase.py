"""The lower-confidence tier: failures described in words rather than printed by vLLM.

People paste issue text, chat messages and summaries, in English and Chinese ("ran out of
GPU memory while loading", "the kernel killed it", "被 OOM killer 杀掉", "显存不足",
"KV 缓存不够"). These patterns only run on lines that are not log records (no vLLM prefix),
and what they find is marked ``tier: paraphrase`` so the verdict says it rests on wording,
not on a vLLM message. ``\\bOOM\\b`` never matches next to CJK text (both are word
characters), so the ASCII words here are delimited by letters only.
"""

from __future__ import annotations

import re

from oomguard.diagnose.events import LogLine, Signal
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.parsers.prose import phase_hints
import oomguard.lazy_re as lazy_re

TIER = "paraphrase"

_HOST = lazy_re.compile(
    r"(?<![A-Za-z])OOM[\s_-]?kill|kernel killed|killed by (?:the )?(?:kernel|oom|linux|os|system|cgroup)|"
    r"ran out of (?:system |host |cpu |)(?:RAM|memory on the host)|killed due to (?:high|excessive|too much) memory|"
    r"(?:node|host|machine|server) (?:is |was )?running (?:low on|out of) memory|killed by (?:kubernetes|k8s|docker|the kubelet)|"
    r"memory (?:crosses|crossed|exceeds|exceeded|hits|hit|reaches|reached) (?:the |its )?(?:defined |memory |pod |"
    r"container |cgroup )?limit|(?:pod|container) (?:dies|died|was killed|got killed|is killed)[^.]{0,80}(?<![A-Za-z])OOM|out of (?:host|system|cpu) (?:memory|RAM)|"
    r"(?:host|system|cpu) (?:memory|RAM) (?:is |was |got )?(?:full|exhausted)|"
    # "CPU Out of Memory", "host OOM", "RAM OOM": the memory named first, then the OOM (Ray's and RL frameworks' words)
    r"(?<![A-Za-z])(?:host|system|cpu|RAM)[\s_-]+(?:out[\s_-]of[\s_-]memory|OOM(?![A-Za-z]))|"
    r"(?:not (?:having |have |has )?(?:sufficient|enough)|insufficient|lack of|short of) (?:host |system |cpu |physical )?"
    r"RAM\b|(?:not (?:having |have |has )?(?:sufficient|enough)|insufficient|lack of) (?:host|system|cpu|physical) memory|"
    r"被.{0,16}?(?:OOM|oom|内核|系统|kernel).{0,8}?(?:杀|kill)|(?:系统|主机|物理|CPU\s*)内存(?:不足|不够|耗尽|爆了|溢出)|"
    r"(?<!显)内存不足|(?<!显)内存不够|(?<!显)内存爆了",
    re.IGNORECASE)
_KV = lazy_re.compile(
    r"KV[\s-]*(?:cache|缓存)\s*(?:is |was )?(?:不够|不足|太小|空间不足|装不下|not big enough|insufficient|too small|full)|"
    r"not enough (?:room|space|memory) (?:for|in) (?:the )?KV", re.IGNORECASE)
_GPU = lazy_re.compile(
    r"ran out of (?:GPU|CUDA|video|device) memory|run(?:s|ning)? out of (?:GPU|CUDA|video|device) memory|out of VRAM|"
    r"(?:GPU|CUDA|video) memory (?:is |was |got )?(?:full|exhausted|insufficient)|"
    r"not enough (?:GPU|CUDA|video|device) memory|(?:insufficient|not enough) (?:free )?memory|(?:does not|doesn't|do not|don't|won't) fit (?:on|in|into) (?:the |one |a )?GPU|"
    r"显存(?:不足|不够|溢出|爆了|爆掉|占满|耗尽|满了|OOM)|爆显存|(?:GPU|CUDA|显卡)\s*(?:内存|显存)?\s*(?:不足|不够|溢出|OOM)|"
    r"(?<![A-Za-z])OOM(?:s|ed|ing)?(?![A-Za-z])|out of memory|内存溢出", re.IGNORECASE)
# Someone says another process holds the GPU ("other processes taking up about 15G", "另一个进程占用了显存"):
# kept for the paste, it places a GPU OOM that has no phase as start-up free memory (classifier._from_paste).
_CORESIDENT = lazy_re.compile(
    r"(?:other|another|second) (?:process(?:es)?|programs?|jobs?|models?|containers?|instances?)\b[^.?!]{0,40}?"
    r"(?:taking|using|occupying|holding|consuming|already uses?|running on)|"
    r"(?:其他|其它|另一个|别的)(?:进程|程序|模型|任务).{0,12}?(?:占用|占了|使用)", re.IGNORECASE)
_CJK = lazy_re.compile(r"[\u3400-\u9fff]")


def note_paste_words(line: LogLine, col: Collector, msg: str) -> None:
    """Words that describe the whole paste rather than one line (kept per file and run, not a signal)."""
    if line.kernel or not (line.prose or _CJK.search(msg)):
        return
    if _CORESIDENT.search(msg):
        col.paste_hints.setdefault((line.file, col.run), set()).add("coresident")


def parse_paraphrase(line: LogLine, col: Collector, msg: str, joined: str) -> bool:
    if line.kernel:
        return False
    if not (line.prose or _CJK.search(msg)):
        return False
    numbers: dict[str, object] = {"tier": TIER}
    if _HOST.search(msg):
        col.signal(Signal.HOST_PROSE, line, numbers=numbers)
        return True
    if _KV.search(msg):
        col.signal(Signal.KV_PROSE, line, numbers=numbers)
        return True
    if _GPU.search(msg):
        col.signal(Signal.OOM_PROSE, line, numbers=numbers, hints=phase_hints(joined))
        return True
    return False



# For diagnose's byte scan (parsers/scanset.py scans every module-level pattern here but these): any CJK character.
NOT_SCANNED = (_CJK,)
