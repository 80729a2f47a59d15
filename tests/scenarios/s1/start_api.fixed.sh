#!/bin/bash
# Scenario S1 (../shared/scenarios.md): one 1M-token request on one A100 80 GB.
MODEL=/models/qwen-1m
vllm serve $MODEL \
  --max-model-len 1048576 \
  --max-num-batched-tokens 4096 \
  --max-num-seqs 1 \
  --enable-prefix-caching \
  --gpu-memory-utilization 0.9 \
  --enforce-eager
