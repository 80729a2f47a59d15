"""Encoder-only pooling models (BERT, RoBERTa / XLM-RoBERTa: bge, e5, gte-style embedders and
rerankers).

From vLLM 0.32's model_executor/models/bert.py and roberta.py, checked against vLLM on the CPU
build (scripts/vllm_kv_oracle.py: no layer registers a KV cache spec, get_kv_cache_groups finds
none): bidirectional attention runs over each request alone, so the engine keeps no KV pool; the
runner is "pooling", so the profile run ends with the pooler, not the sampler
(gpu_model_runner.py::_dummy_pooler_run), and no CUDA graphs beyond the encoder's.

Weights: word, position (``max_position_embeddings``) and token-type embeddings with their
LayerNorm; per layer q/k/v and output projections with biases, two LayerNorms and an ungated
GELU MLP with biases; the pooler dense layer where the architecture has one.
"""

from __future__ import annotations

from oomguard.model.architectures import register
from oomguard.model.architectures.builder import build_description
from oomguard.model.architectures.common import first_architecture, need
from oomguard.model.description import AttentionLayer, LayerKind, ModelDescription


@register("bert", "roberta", "xlm-roberta")
def describe_encoder(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None) -> ModelDescription:
    mt = str(cfg.get("model_type") or config.get("model_type"))
    H = int(need(cfg, "hidden_size", what="hidden size", model_type=mt))
    n = int(need(cfg, "num_hidden_layers", what="layer count", model_type=mt))
    heads = int(need(cfg, "num_attention_heads", what="attention heads", model_type=mt))
    vocab = int(need(cfg, "vocab_size", what="vocabulary size", model_type=mt))
    inter = int(cfg.get("intermediate_size") or 4 * H)
    max_pos = int(cfg.get("max_position_embeddings") or 512)
    types = int(cfg.get("type_vocab_size") or 0)
    # No decoder KV: every layer is attention over the request alone (kind NONE for the KV cache;
    # its projections are counted as an attention layer's).
    layers = tuple(AttentionLayer(LayerKind.NONE, heads, H // heads, H // heads, kv_shared=True) for _ in range(n))
    arch = first_architecture(config)
    # position and token-type embeddings, the embedding LayerNorm, the o_proj bias and the MLP
    # biases the generic layer formula leaves out; the pooler / classifier dense (H×H + H) only
    # for the classification heads (vLLM's embedding BertModel has none: the oracle's numel)
    extra = (max_pos + types) * H + 2 * H + n * (H + inter + H + 2 * H)
    if arch.endswith("ForSequenceClassification"):
        extra += H * H + H + H * int(cfg.get("num_labels") or len(cfg.get("id2label") or {}) or 1)
    # BertForMaskedLM (models/bert.py BertMLMHead): dense H×H, LayerNorm and a decoder nn.Linear of
    # its own (load_weights copies the embedding into it: two tensors in memory, never tied)
    mlm = mt == "bert" and arch == "BertForMaskedLM"
    if mlm:
        extra += H * H + 3 * H + vocab
    return build_description(
        config, cfg, name=name, source=source, model_type=mt, hf_quant=hf_quant, max_len=max_pos, rope=None,
        family="encoder",
        hidden_size=H,
        num_layers=n,
        num_attention_heads=heads,
        num_kv_heads=heads,
        head_size=H // heads,
        intermediate_size=inter,
        vocab_size=vocab,
        tie_word_embeddings=not mlm,
        layers=layers,
        derived_max_model_len=max_pos - (2 if mt in ("roberta", "xlm-roberta") else 0),
        qkv_bias=True,
        gated_mlp=False,
        pooling=True,
        extra_params={"unquantized": [extra, False]},
    )
