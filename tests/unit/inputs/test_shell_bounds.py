"""inputs.shell: bounded expansion, command substitutions as one word, ANSI-C quotes, linear splitting."""

from __future__ import annotations

import shlex
import time

import pytest

from oomguard.errors import InputError
from oomguard.inputs.shell import MAX_VARIABLE_CHARS, lex, split_words


def _words(text: str) -> list[str]:
    return [w.text for c in lex(text).commands for w in c.words]


@pytest.mark.parametrize("quote", ["", '"'])
def test_doubling_a_variable_fails_fast(quote):
    script = "A=xx\n" + "".join(f"A={quote}$A$A{quote}\n" for _ in range(40)) + "vllm serve $A\n"
    assert len(script) < 1024
    t0 = time.monotonic()
    with pytest.raises(InputError, match="shell expansion") as e:
        lex(script, path="start_api.sh")
    assert time.monotonic() - t0 < 2
    assert str(e.value).startswith("start_api.sh:")


def test_many_variables_hit_the_total_cap():
    big = "x" * (MAX_VARIABLE_CHARS - 10)
    script = f"A={big}\n" + "vllm serve m " + " ".join(["$A"] * 100) + "\n"
    with pytest.raises(InputError, match="more than 4 MiB"):
        lex(script)


def test_backticks_are_one_unresolved_word():
    script = 'vllm serve `cat /etc/model name` --max-model-len 4096 --served-model-name "a `b --c d` e"\n'
    (cmd,) = lex(script).commands
    texts = [w.text for w in cmd.words]
    assert texts == ["vllm", "serve", "`cat /etc/model name`", "--max-model-len", "4096", "--served-model-name", "a `b --c d` e"]
    assert cmd.words[2].unresolved == ("`cat /etc/model name`",)
    assert cmd.words[6].unresolved == ("`b --c d`",)


def test_dollar_paren_with_quotes_inside():
    assert _words('vllm serve $(echo ")" x) --y 1\n') == ["vllm", "serve", '$(echo ")" x)', "--y", "1"]


def test_ansi_c_quotes():
    assert _words("vllm serve m --max-model-len $'40\\x396' --x $'a\\tb\\'c'\n") == [
        "vllm", "serve", "m", "--max-model-len", "4096", "--x", "a\tb'c"]
    with pytest.raises(InputError, match=r"unterminated \$'"):
        lex("vllm serve $'abc\n")


@pytest.mark.parametrize("line", [
    'vllm serve m --x "a b" c\\ d # comment',
    "a'b c'd \"q\\\"q\" e",
    'p="{\\"a\\": 1}" --json \'{"k": [1, 2]}\'',
    "",
    "   # only a comment",
])
def test_split_words_matches_shlex(line):
    assert split_words(line) == shlex.split(line, comments=True)


def test_split_words_unterminated_quote():
    with pytest.raises(ValueError):
        split_words('vllm serve "model')


def test_split_words_is_linear():
    line = "vllm serve m " + "a" * (1 << 20)
    t0 = time.monotonic()
    assert len(split_words(line)[-1]) == 1 << 20
    assert time.monotonic() - t0 < 2  # shlex: ~100 s for this line
