#!/bin/bash
# Scenario S2 (../shared/scenarios.md): 8 x RTX 3090 (24 GB), a 13B model, OOM after hours of traffic.
export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
vllm serve codellama/CodeLlama-13b-Instruct-hf \
  --tensor-parallel-size 8 \
  --gpu-memory-utilization 0.8 \
  --max-model-len 8192
