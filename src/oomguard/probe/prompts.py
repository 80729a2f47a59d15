"""Prompts of an exact token count, each one different from its first block.

With the server's ``/tokenize`` we learn the ids of ordinary words once and
send prompts as token-id lists (``/v1/completions`` accepts them), so the
count is exact and no BOS is added behind our back. Without it we send text
built from words that are one token in the common BPE vocabularies (GPT-2,
Llama, Qwen): an approximation, stated as such; the server's ``usage`` then
gives the real count.

Every prompt starts differently: with prefix caching on, eight identical
prompts would share their KV blocks and the probe would measure an eighth of
the memory it claims to.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oomguard.probe.client import ClientFailure

if TYPE_CHECKING:
    from oomguard.probe.client import ProbeClient

# Words that are a single token (with their leading space) in GPT-2, Llama 2/3,
# Mistral and Qwen vocabularies.
WORDS = (
    "the of and to in is that for it as was with be on not he by are this at from "
    "his but they have had which one you were her all she there can an their we "
    "been has when who more will no if out so said what up its about into than them "
    "only other new some could time these two may then first any like now my such "
    "make over our even most made after also did many before must through back years "
    "where much your way well down should because each just those people how too "
    "little state good very world still own see men work long here get both between"
).split()


# Prefix caching hashes each block chained to the hash of the block before it, so a
# prompt whose first tokens are its own shares no block with any other, whatever
# the block size. Only this many leading tokens are drawn per request; the rest is
# a tail drawn once per length. A 1M-token prompt then costs a list copy, not 1M draws.
UNIQUE_HEAD = 32


@dataclass
class PromptBuilder:
    """Builds the ``prompt`` field for a given token count."""

    exact: bool
    method: str  # "tokenize" or "approximate"
    pool: tuple[int, ...] = ()
    _tails: dict[int, Any] = field(default_factory=dict, repr=False)

    def build(self, n_tokens: int, seed: int) -> list[int] | str:
        if n_tokens < 1:
            raise ValueError("a prompt needs at least one token")
        rng = random.Random(seed)
        if self.exact:
            head = min(n_tokens, UNIQUE_HEAD)
            return rng.choices(self.pool, k=head) + self._tail(n_tokens - head)
        # One BOS is usually added to a text prompt; leave room for it.
        n_words = max(1, n_tokens - 1)
        head = min(n_words, UNIQUE_HEAD)
        words = " ".join(rng.choices(WORDS, k=head))
        tail = self._tail(n_words - head)
        return words + tail

    def _tail(self, n: int) -> Any:
        if n <= 0:
            return [] if self.exact else ""
        if n not in self._tails:
            rng = random.Random(n)
            if self.exact:
                self._tails[n] = rng.choices(self.pool, k=n)
            else:
                self._tails[n] = "".join(" " + w for w in rng.choices(WORDS, k=n))
        return self._tails[n]

    def describe(self) -> str:
        if self.exact:
            return f"exact: token ids from the server's /tokenize ({len(self.pool)} distinct ids)"
        return "approximate: common words counted as one token each (no /tokenize); see usage.prompt_tokens"


async def make_builder(client: ProbeClient, model: str | None, tokenize_ok: bool) -> PromptBuilder:
    """Ask ``/tokenize`` for the ids of the bundled words; fall back to the approximation."""
    if tokenize_ok:
        text = " ".join(WORDS * 4)
        payload: dict[str, object] = {"prompt": text, "add_special_tokens": False}
        if model:
            payload["model"] = model
        try:
            status, body = await client.post(client.url.root + "/tokenize", payload)
        except ClientFailure:
            status, body = None, None
        if status == 200 and isinstance(body, dict):
            ids = body.get("tokens")
            if isinstance(ids, list) and ids and all(isinstance(i, int) for i in ids):
                return PromptBuilder(exact=True, method="tokenize", pool=tuple(sorted(set(ids))))
    return PromptBuilder(exact=False, method="approximate")
