"""Every engine flag of every release, and what it does to the memory plan: one table.

Three classes (docs/memory-model.md#flags). ``MODELLED``: the planner reads it (the test
``tests/unit/model/test_flag_wiring.py`` sets each one and asserts the plan moves).
``NO_MEMORY_EFFECT``: it cannot change GPU memory at start-up, with the reason.
``NOT_MODELLED``: it can, and the planner does not model it; a launch that sets it gets a
note in the plan saying so (``unmodelled_notes``). Parsed-and-ignored is a defect: the test
fails on any flag of ``oomguard/data/flags`` that is in none of them.
"""

from __future__ import annotations


def _each(reason: str, *dests: str) -> dict[str, str]:
    return {d: reason for d in dests}


MODELLED: dict[str, str] = {
    "async_scheduling": "batches kept in flight (2 on the V1 runner, PP+1 on MRV2, from 0.27): sliding-window blocks per request",
    "runner": "the pooling runner: no sampler warm-up in the profile run",
    "task": "a pooling task (embed, score, classify, reward): the pooling runner, no sampler warm-up",
    "convert": "converting to a pooling model: the pooling runner, no sampler warm-up",
    "block_size": "KV page size and block counts",
    "compilation_config": "cudagraph_mode, capture sizes: the CUDA-graph term",
    "cpu_offload_gb": "weights kept in host memory",
    "cuda_graph_sizes": "CUDA-graph capture sizes (0.10-0.11 spelling)",
    "cudagraph_capture_sizes": "CUDA-graph capture sizes",
    "disable_custom_all_reduce": "custom all-reduce buffers (non-torch or baseline, by release)",
    "disable_hybrid_kv_cache_manager": "sliding-window layers allocated as full attention",
    "dtype": "weights, activations and the auto KV dtype",
    "enable_chunked_prefill": "the profiled token budget without chunking",
    "enable_expert_parallel": "experts split over EP = TP × DP ranks at full width, instead of TP",
    "data_parallel_size": "with --enable-expert-parallel experts split over TP × DP; otherwise each replica is planned alone",
    "enable_prefix_caching": "hybrid models: Mamba state blocks per request (align mode)",
    "enforce_eager": "no CUDA graphs",
    "gpu_memory_utilization": "the budget: total × utilization",
    "hf_overrides": "rope scaling / max positions: the derived max_model_len",
    "kv_cache_dtype": "KV bytes per token",
    "kv_cache_memory_bytes": "the KV pool, profiling skipped",
    "language_model_only": "the multimodal encoder is not profiled",
    "limit_mm_per_prompt": "all-zero limits skip the encoder profile",
    "max_cudagraph_capture_size": "CUDA-graph capture sizes",
    "max_model_len": "blocks per request, concurrency, the start-up fit check",
    "max_num_batched_tokens": "the profile run's token budget (activation)",
    "max_num_seqs": "sampler rows and capture sizes",
    "mm_ipc_gpu_memory_gb": "reserve_mm_ipc_gpu_memory: taken from the KV pool",
    "moe_backend": "MXFP4 expert padding per kernel",
    "nnodes": "custom all-reduce is off for a TP group across nodes",
    "num_gpu_blocks_override": "the pool is exactly that many blocks",
    "pipeline_parallel_size": "layers per stage, NCCL send/recv",
    "quantization": "online quantization (fp8) of an unquantized checkpoint",
    "rope_scaling": "the derived max_model_len (old spelling of hf_overrides.rope_scaling)",
    "skip_mm_profiling": "the multimodal encoder is not profiled",
    "speculative_config": "speculative tokens: capture sizes, Mamba state blocks, MTP weights",
    "tensor_parallel_size": "every per-rank term",
}

NO_MEMORY_EFFECT: dict[str, str] = {
    **_each("which model, revision or tokenizer to read: the model description carries its size",
            "model", "tokenizer", "revision", "code_revision", "tokenizer_revision", "tokenizer_mode",
            "trust_remote_code", "hf_config_path", "hf_token", "config_format", "served_model_name",
            "skip_tokenizer_init", "tokenizer_pool_size", "tokenizer_pool_type", "tokenizer_pool_extra_config",
            "renderer_num_workers", "model_impl", "model_class_overrides", "rope_theta", "seed"),
    **_each("how weights are read from disk, not how much they take on the GPU",
            "load_format", "download_dir", "ignore_patterns", "model_loader_extra_config", "safetensors_load_strategy",
            "safetensors_prefetch_block_size", "safetensors_prefetch_num_threads", "pt_load_map_location",
            "use_tqdm_on_load", "max_parallel_loading_workers", "quantization_param_path"),
    **_each("logging, metrics, tracing and profiling switches",
            "aggregate_engine_logging", "collect_detailed_traces", "custom_histogram_buckets", "disable_log_requests",
            "disable_log_stats", "enable_log_requests", "enable_logging_iteration_details", "enable_mfu_metrics",
            "kv_cache_metrics", "kv_cache_metrics_sample", "cudagraph_metrics", "log_config_file", "log_level",
            "logging_config", "otlp_traces_endpoint", "show_hidden_metrics_for_version", "per_request_spec_decode_metrics",
            "enable_layerwise_nvtx_tracing", "ray_workers_use_nsight", "profiler_config", "eplb_log_balancedness",
            "jit_monitor_mode", "jit_monitor_verbose", "enable_trace_replay"),
    **_each("process placement, addresses and transport of the control plane",
            "data_parallel_address", "data_parallel_backend", "data_parallel_external_lb", "data_parallel_hybrid_lb",
            "data_parallel_multi_port_external_lb", "data_parallel_rank", "data_parallel_rpc_port",
            "data_parallel_size_local", "data_parallel_start_rank", "distributed_executor_backend",
            "distributed_timeout_seconds", "cpu_distributed_timeout_seconds", "master_addr", "master_port", "node_rank",
            "worker_cls", "worker_extension_cls", "worker_use_ray", "engine_use_ray", "device", "device_ids", "numa_bind",
            "numa_bind_cpus", "numa_bind_nodes", "disable_nccl_for_dp_synchronization", "enable_nccl_comm_suspend",
            "enable_fault_tolerance", "fault_tolerance_config", "watchdog_config", "shutdown_timeout",
            "weight_transfer_config", "dcp_comm_backend", "dp_sync_interval", "elastic_ep_max_dp_size",
            "enable_elastic_ep"),
    **_each("scheduling order and admission: the budget is sized by max_num_batched_tokens and max_num_seqs",
            "preemption_mode", "scheduling_policy", "scheduler_cls", "scheduler_delay_factor", "scheduler_reserve_full_isl",
            "prefill_schedule_interval", "stream_interval", "max_num_partial_prefills", "max_long_partial_prefills",
            "long_prefill_token_threshold", "long_prefill_token_threshold_adaptive", "max_num_queued_reqs",
            "max_num_queued_tokens", "disable_chunked_mm_input", "multi_step_stream_outputs", "disable_async_output_proc",
            "use_v2_block_manager", "prefix_caching_hash_algo", "prefix_cache_retention_interval", "prefix_match_unit",
            "speculative_disable_by_batch_size", "expert_placement_strategy"),
    **_each("request-level sampling, parsing and output options (the sampler warm-up forces its own settings)",
            "generation_config", "override_generation_config", "max_logprobs", "logprobs_mode", "logits_processor_pattern",
            "logits_processors", "return_sampling_mask", "use_fp64_gumbel", "enable_return_routed_experts",
            "aux_output_config", "reasoning_parser", "reasoning_parser_plugin", "reasoning_config", "enable_reasoning",
            "guided_decoding_backend", "guided_decoding_disable_additional_properties",
            "guided_decoding_disable_any_whitespace", "guided_decoding_disable_fallback", "structured_outputs_config",
            "spec_decoding_acceptance_method", "typical_acceptance_sampler_posterior_alpha",
            "typical_acceptance_sampler_posterior_threshold", "disable_logprobs_during_spec_decoding",
            "speculative_disable_mqa_scorer", "watermark", "watermark_config", "fail_on_environ_validation",
            "allow_deprecated_quantization", "io_processor_plugin", "chat_template_text_format"),
    **_each("host-side media handling and caches (host RAM: oomguard host), not GPU memory",
            "interleave_mm_strings", "allowed_local_media_path", "allowed_media_domains", "media_io_kwargs",
            "mm_hasher_algorithm", "mm_processor_cache_gb", "mm_processor_cache_type", "mm_shm_cache_max_object_size_mb",
            "disable_mm_preprocessor_cache", "mm_cache_preprocessor", "mm_tensor_ipc", "enable_shm_tensor_arena", "mm_device_do_normalize",
            "mm_processor_device"),
    **_each("pinned host memory for V0 swap blocks (host RAM: oomguard host), not GPU memory", "swap_space"),
    **_each("kernel tuning with the same tensors", "enable_flashinfer_autotune", "ir_op_priority", "optimization_level",
            "performance_mode", "mamba_ssu_algorithm", "mamba_cache_philox_rounds", "enable_mamba_cache_stochastic_rounding",
            "enable_bf16x3_router_gemm", "disable_cascade_attn", "sleep_mode_backend", "sleep_mode_offload_cudagraph",
            "sleep_preserve_parameter_names"),
}

NOT_MODELLED: dict[str, str] = {
    **_each("LoRA adapter slots (max_loras × rank × modules) and their activations are not in the plan",
            "enable_lora", "max_loras", "max_lora_rank", "max_cpu_loras", "lora_extra_vocab_size", "lora_dtype",
            "long_lora_scaling_factors", "fully_sharded_loras", "enable_lora_bias", "lora_target_modules",
            "default_mm_loras", "enable_moe_shared_loras", "enable_tower_connector_lora", "enable_mixed_moe_lora_format",
            "specialize_active_lora", "max_lora_cls_labels", "qlora_adapter_name_or_path"),
    **_each("prompt adapters are not in the plan", "enable_prompt_adapter", "max_prompt_adapters", "max_prompt_adapter_token"),
    **_each("the V0 speculative flags (draft model weights and KV) are not in the plan; use --speculative-config",
            "speculative_model", "num_speculative_tokens", "speculative_draft_tensor_parallel_size",
            "speculative_max_model_len", "speculative_model_quantization", "ngram_prompt_lookup_max",
            "ngram_prompt_lookup_min", "spec_model", "spec_method", "spec_tokens", "num_lookahead_slots"),
    **_each("V0 multi-step scheduling buffers are not in the plan", "num_scheduler_steps"),
    **_each("the V0 CUDA-graph length limit is not in the graph estimate", "max_seq_len_to_capture", "max_context_len_to_capture"),
    **_each("per-layer KV dtypes are not in the plan (all layers use --kv-cache-dtype)", "kv_cache_dtype_skip_layers", "calculate_kv_scales"),
    **_each("Mamba state dtype, block size and cache mode overrides are not in the plan (the model's defaults are used)",
            "mamba_cache_dtype", "mamba_ssm_cache_dtype", "mamba_block_size", "mamba_cache_mode",
            "enable_mamba_fine_grained_prefix_cache", "enable_mamba_shared_prefix_checkpoint", "use_replayssm",
            "replayssm_buffer_len", "swa_bounded_replay"),
    **_each("context parallelism (KV split over DCP/PCP ranks) is not in the plan", "decode_context_parallel_size",
            "prefill_context_parallel_size", "dcp_kv_cache_interleave_size", "cp_kv_cache_interleave_size", "dcp_q_replicate"),
    **_each("redundant experts and EPLB buffers are not in the plan", "enable_eplb", "num_redundant_experts", "eplb_config",
            "eplb_step_interval", "eplb_window_size", "enable_ep_weight_filter"),
    **_each("expert-parallel all-to-all buffers (DeepEP / pplx) are not in the plan", "all2all_backend"),
    **_each("dual-batch overlap (micro-batched activations) is not in the plan", "enable_dbo", "dbo_decode_token_threshold",
            "dbo_prefill_token_threshold", "ubatch_size"),
    **_each("KV offloading / transfer connectors (their GPU staging buffers) are not in the plan", "kv_offloading_size",
            "kv_offloading_backend", "kv_transfer_config", "kv_events_config", "ec_transfer_config", "ec_manager_config"),
    **_each("weight offloading beyond --cpu-offload-gb is not in the plan", "offload_backend", "offload_group_size",
            "offload_num_in_group", "offload_prefetch_step", "offload_params", "cpu_offload_params"),
    **_each("the CuMem allocator / sleep mode: start-up accounting is assumed unchanged", "enable_sleep_mode", "enable_cumem_allocator"),
    **_each("the attention/kernel backend choice (its workspaces and block-size rules) is not in the plan",
            "attention_backend", "attention_config", "kernel_config", "linear_backend", "mamba_backend", "gdn_prefill_backend",
            "kda_decode_backend", "kda_prefill_backend", "sparse_indexer_topk_backend", "monokernel", "enable_hc_sp",
            "enable_batch_sharded_sampling", "override_attention_dtype", "additional_config"),
    **_each("multimodal encoder placement and precision are not in the plan", "mm_encoder_tp_mode", "mm_encoder_attn_backend",
            "mm_encoder_attn_dtype", "mm_encoder_fp8_scale_path", "mm_encoder_fp8_scale_save_margin",
            "mm_encoder_fp8_scale_save_path", "mm_encoder_only", "enable_multimodal_encoder_data_parallel",
            "mm_processor_kwargs", "video_pruning_method", "video_pruning_rate", "enable_mm_embeds", "enable_prompt_embeds"),
    **_each("pooler settings (pooling type, normalisation) are not in the plan; the pooling runner itself is "
            "(no sampler warm-up)", "pooler_config", "override_pooler_config"),
    **_each("scheduler token caps beyond max_num_batched_tokens are not in the plan", "max_num_scheduled_tokens",
            "max_num_active_seqs"),
    **_each("sliding window disabled: layers would cache the full context; not in the plan", "disable_sliding_window"),
    **_each("KV sharing across layers (fast prefill) is not in the plan", "kv_sharing_fast_prefill"),
    **_each("model-family plugins (engram, diffusion, Neuron) are not in the plan", "engram_config", "diffusion_config",
            "override_neuron_config"),
    **_each("quantization overrides beyond --quantization are not in the plan", "quantization_config"),
}


def classify(dest: str) -> str | None:
    for name, table in (("modelled", MODELLED), ("no-memory-effect", NO_MEMORY_EFFECT), ("not-modelled", NOT_MODELLED)):
        if dest in table:
            return name
    return None


def _is_set(value) -> bool:
    return value not in (None, False, "", [], {}, 0, "auto") or value is True


def unmodelled_notes(flags: dict) -> list[str]:
    """One note per reason, naming the flags of this launch the plan does not model."""
    by_reason: dict[str, list[str]] = {}
    for dest, value in flags.items():
        reason = NOT_MODELLED.get(dest)
        if reason is not None and _is_set(value):
            by_reason.setdefault(reason, []).append("--" + dest.replace("_", "-"))
    return [f"not modelled: {', '.join(sorted(opts))}: {reason}" for reason, opts in by_reason.items()]
