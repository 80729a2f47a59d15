#!/bin/bash
# Scenario S3 (../shared/scenarios.md): 750,000 tokens on 4 x RTX 4090 with a 27B-class model.
vllm serve /data/models/qwen3-27b-w4a16 \
  --served-model-name qwen3-27b \
  --tensor-parallel-size 4 \
  --max-model-len 750000 \
  --gpu-memory-utilization 0.85 \
  --kv-cache-dtype fp8_e4m3 \
  --kv-cache-memory 10737418240 \
  --enable-prefix-caching --enable-chunked-prefill \
  --max-num-batched-tokens 8192 --max-num-seqs 96 \
  --no-scheduler-reserve-full-isl \
  --kv-transfer-config '{"kv_connector":"OffloadingConnector","kv_role":"kv_both",
      "kv_connector_extra_config":{"cpu_bytes_to_use":214748364800,
      "eviction_policy":"arc","offload_prompt_only":true,
      "n_read_threads":16,"n_write_threads":4}}' \
  --speculative-config '{"method":"mtp","num_speculative_tokens":3}' \
  --rope-scaling '{"rope_type":"yarn","factor":3.0,"original_max_position_embeddings":262144}' \
  --compilation-config '{"cudagraph_mode":"PIECEWISE"}' \
  --disable-custom-all-reduce
