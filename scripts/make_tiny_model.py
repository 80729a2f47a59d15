"""Build a tiny random-weight Llama model that the vLLM CPU build can serve.

Usage (run with the vLLM venv's python, which has torch/transformers/tokenizers):

    .venv-vllm/bin/python scripts/make_tiny_model.py OUT_DIR [--dtype float32|bfloat16]

The result is a normal Hugging Face model directory (config.json, model.safetensors,
tokenizer.json, tokenizer_config.json with a chat template, generation_config.json), built
entirely offline: the byte-level BPE tokenizer is trained here on generated text, the weights are
seeded random numbers. Same arguments, same files (seeded, no timestamps in the outputs).

Shape: 2 layers, hidden 128, 4 query heads, 2 KV heads (GQA), head_dim 32, vocab 512,
max_position_embeddings 2048. head_dim 32 is the smallest the vLLM CPU attention backend accepts
(CPUAttentionBackend.get_supported_head_sizes: 32, 64, 80, ...). Per token of KV cache that is
2 layers * 2 (K,V) * 2 heads * 32 * 4 B = 1 KiB in float32, so a 128 MiB KV budget holds
131072 tokens: plenty for tests. float32 is the default: vLLM 0.32's CPU attention uses AMX
tiles for bf16 without requesting AMX permission from Linux, so on an AMX CPU the first short
bf16 request kills the worker with SIGILL. Serve it with --dtype float32 (vLLM's "auto" turns a
float32 checkpoint into 16-bit). --dtype bfloat16 is kept for CPUs where that is wanted.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

VOCAB_SIZE = 512
SEED = 1234

# A simple template that needs no special tokens beyond BOS/EOS; vLLM renders it with jinja.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

_WORDS = (
    "the memory of a gpu holds weights activations and a kv cache for every request "
    "blocks pages tokens layers heads tensor parallel pipeline model server vllm oomguard "
    "hello world what is how many can you tell me about a short story one two three four five "
    "six seven eight nine ten user assistant system question answer yes no maybe fine thanks"
).split()


def _corpus(rng: random.Random, lines: int = 4000) -> list[str]:
    """Generated training text: random word salad plus digits and punctuation, so every byte
    pattern a test prompt is likely to use has merges."""
    out = []
    for _ in range(lines):
        n = rng.randint(3, 20)
        words = [rng.choice(_WORDS) for _ in range(n)]
        if rng.random() < 0.3:
            words.append(str(rng.randint(0, 99999)))
        out.append(" ".join(words) + rng.choice([".", "?", "!", ",", ""]))
    return out


def build_tokenizer(out_dir: Path, rng: random.Random):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["<s>", "</s>", "<pad>", "<unk>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(rng), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        model_max_length=2048,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out_dir))
    return fast


def build_model(out_dir: Path, tokenizer, dtype_name: str) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[dtype_name]
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=2048,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype=dtype_name,
    )
    model = LlamaForCausalLM(config).to(dtype)
    model.eval()
    model.save_pretrained(str(out_dir), safe_serialization=True)
    GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
    ).save_pretrained(str(out_dir))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--dtype", choices=("bfloat16", "float32"), default="float32")
    args = parser.parse_args(argv)

    args.out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED)
    tokenizer = build_tokenizer(args.out_dir, rng)
    build_model(args.out_dir, tokenizer, args.dtype)
    summary = {
        "out_dir": str(args.out_dir),
        "dtype": args.dtype,
        "vocab_size": VOCAB_SIZE,
        "files": sorted(p.name for p in args.out_dir.iterdir()),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
