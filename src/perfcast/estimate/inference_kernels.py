"""Kernel times of serving ops with inference number formats (roofline calibration).

Training times every GEMM at one precision; serving mixes formats inside one kernel, so this
module evaluates the same roofline formulas (``kernels.efficiency``, Williams et al. 2009) with
the calibrated per-generation parameters of the roofline backend, but with separate byte
counts for activations, weights and the KV cache:

* GEMM: F = 2·m·n·k·batch at the compute format's peak and GEMM efficiency curve; bytes =
  batch·(m·k·s_a + k·n·s_w + m·n·max(s_a, 2)). Weight-only int8/int4 (Frantar et al., GPTQ
  2023; gpt-fast) compute in 16-bit and stream s_w-byte weights, dequantizing in registers at
  a calibrated share of the streaming rate. FP8/FP4 W+A (Micikevicius et al. 2022, "FP8
  formats"; NVFP4 on Blackwell) compute at the FP8/FP4 peak.
* decode attention: reads the sequence's whole KV cache once per step (Pope et al. 2022 §3.1),
  bytes = seqs·L·(KV bytes per token per layer) + Q and O; FLOPs 2·seqs·heads·L·(d_qk + d_v).
* prefill attention: the backend's flash-attention forward time (compute-bound).
* a measured backend (``--kernel-backend measured --kernel-table FILE``) replaces the GEMM
  time by its table's where the table covers the shape (``table_gemm_time_s``).

``bandwidth_efficiency`` scales every HBM rate (calibration/inference_overheads.yaml).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import numpy as np

from perfcast.calibration.kernel_roofline import GenerationKernelCalibration
from perfcast.estimate.inference_ops import AttentionPass, attention_op, head_dims
from perfcast.graph.ops import GemmOp, MemoryOp, Phase
from perfcast.graph.stage import sliding_window_share
from perfcast.kernels.backend import KernelBackend
from perfcast.kernels.efficiency import attention_roofline_time_s, gemm_efficiency, memory_time_s
from perfcast.memory.inference import kv_cache_bytes_per_token
from perfcast.op_counts import attention_flops, attention_keys_per_query, gemm_flops
from perfcast.schedule.op_time import attention_kernel_keys
from perfcast.specs.dtypes import bytes_per_element
from perfcast.specs.hardware import GPUSpec
from perfcast.specs.inference import InferencePrecision
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy


def roofline_params(backend: KernelBackend, gpu: GPUSpec) -> GenerationKernelCalibration:
    """The roofline calibration block of ``gpu`` the serving formulas take (module docstring):
    the roofline backend's own, or that of the roofline layer under an analytical or measured
    backend (``roofline_layer``), which then times the prefill flash attention (and, measured,
    the GEMMs its table covers, ``table_gemm_time_s``) itself."""
    layer = getattr(backend, "roofline_layer", backend)
    params = getattr(layer, "params", None)
    if params is None:
        from perfcast.errors import InputError

        raise InputError("kernel_backend", getattr(backend, "name", backend),
                         "inference needs a backend with roofline parameters ('roofline')")
    return params(gpu)


def table_gemm_time_s(op: GemmOp, gpu: GPUSpec, backend: KernelBackend,
                      precision: InferencePrecision, roofline_s):
    """Seconds of ``op`` where the backend's measured kernel table covers its shape
    (``MeasuredBackend.outside_table`` false: the table's measured/analytical ratio
    interpolated over its points × the analytical time, exact at a table point, forward-pass
    points, the compute format's precision class); ``roofline_s`` (``gemm_time_s``) elsewhere,
    for a backend without a table, and for weight-only formats (no table holds their mixed
    int8/int4 × 16-bit kernels)."""
    outside_table = getattr(backend, "outside_table", None)
    if outside_table is None or (op.fp8_eligible and precision.weight_only):
        return roofline_s
    fmt = compute_format(precision, op.fp8_eligible)
    outside = outside_table(gpu, "gemm", fmt, gemm_pass=Phase.FORWARD.value,
                            m=op.m, n=op.n, k=op.k, batch=op.batch)
    if np.all(outside):
        return roofline_s
    measured = op.count * backend.gemm_time_s(gpu, op.m, op.n, op.k, op.batch, fmt,
                                              gemm_pass=Phase.FORWARD.value)
    out = np.where(outside, roofline_s, measured)
    return out if np.ndim(out) else float(out)


def compute_format(precision: InferencePrecision,
                   quantized_op: bool) -> Literal["fp8", "fp4", "fp16", "bf16"]:
    """Format the tensor cores run in: FP8/FP4 for quantized W+A ops, else the 16-bit format."""
    if quantized_op and precision.activations in ("fp8", "fp4"):
        return precision.activations
    return "fp16" if precision.activations == "fp16" else "bf16"


def gemm_time_s(op: GemmOp, gpu: GPUSpec, params: GenerationKernelCalibration,
                precision: InferencePrecision, bandwidth_efficiency: float,
                dequant_efficiency: float = 1.0):
    """Seconds of ``op`` (all repetitions): max(compute, activation + weight streaming) + launch.

    t = max(F/(P·eff(F)), (A_bytes + W_bytes/dq)/(BW·e_hbm·e_bw)) + t_launch per GEMM, with
    dq the dequantization efficiency of weight-only formats (1 otherwise).
    """
    quantized = op.fp8_eligible
    fmt = compute_format(precision, quantized)
    s_a = bytes_per_element(fmt)
    s_w = bytes_per_element(precision.weights if quantized else fmt)
    curve = params.gemm_for(fmt)
    flops = gemm_flops(op.m, op.n, op.k, op.batch)
    compute = flops / (gpu.peak_flops(fmt) * gemm_efficiency(flops, curve.eff_max, curve.flops_half))
    act_bytes = op.batch * (op.m * op.k * s_a + op.m * op.n * max(s_a, 2.0))
    weight_bytes = op.batch * op.k * op.n * s_w
    dq = dequant_efficiency if (quantized and precision.weight_only) else 1.0
    rate = params.hbm_efficiency.value * bandwidth_efficiency
    memory = memory_time_s(act_bytes + weight_bytes / dq, gpu.hbm_bandwidth_Bps, rate)
    return op.count * (np.maximum(compute, memory) + params.launch_overhead_s.value)


def memory_op_time_s(op: MemoryOp, gpu: GPUSpec, params: GenerationKernelCalibration,
                     bandwidth_efficiency: float):
    """A memory-bound kernel: bytes/(BW·e_hbm·e_bw) + t_launch, times its count."""
    rate = params.hbm_efficiency.value * bandwidth_efficiency
    return op.count * (memory_time_s(op.bytes_moved, gpu.hbm_bandwidth_Bps, rate)
                       + params.launch_overhead_s.value)


def kv_bytes_per_token_per_layer(model: ModelSpec, strategy: Strategy, kv_format: str,
                                 attention_dp: bool = False) -> float:
    """KV-cache bytes of one token in one layer on one GPU (``memory.inference`` formula)."""
    tp = 1 if attention_dp else strategy.tp
    return kv_cache_bytes_per_token(model, tp, bytes_per_element(kv_format), num_layers=1)


def kv_read_amplification(model: ModelSpec, heads: float, kv_heads: float, exponent: float,
                          mla_head_block: int | None = None):
    """Times each cached KV head is read per step: g^x for g = query heads per KV head on the
    GPU. Grouped kernels (FlashInfer, TRT-LLM XQA) read it once (x = 0); per-query-head
    masked-MHA kernels read it once per query head of the group (x = 1). MLA: once, or
    ⌈heads / block⌉ times where the decode kernel takes its query heads in blocks of
    ``mla_head_block`` and each block reads the latent (the Triton MLA decode kernel, BLOCK_H
    16: vLLM@0.7.3 attention/ops/triton_decode_attention.py L412-416, SGLang@0.4.3
    triton_ops/decode_attention.py L424-431)."""
    if model.is_mla:
        return 1.0 if mla_head_block is None else np.maximum(np.ceil(heads / mla_head_block), 1.0)
    return max(heads / kv_heads, 1.0) ** exponent


def decode_attention_time_s(model: ModelSpec, strategy: Strategy, p: AttentionPass, gpu: GPUSpec,
                            params: GenerationKernelCalibration, kv_format: str,
                            bandwidth_efficiency: float, attention_dp: bool = False,
                            gqa_kv_read_exponent: float = 0.0,
                            mla_head_block: int | None = None):
    """One decode-attention kernel: ``p.num_seqs`` sequences, ``p.seq_q`` new queries each (1, or
    k + 1 when verifying speculated tokens), reading ``p.seq_kv`` cached tokens once.

    Sliding windows cap the keys read at the window on the model's windowed share of layers
    (``graph.stage.sliding_window_share``; gpt-oss: half), the other layers read every cached
    token: the average layer costs share·t(window) + (1 − share)·t(all). MLA reads its
    compressed latent (absorbed form, DeepSeek-V2 §2.1.2: queries attend to the kv_lora_rank +
    rope latent), once per block of ``mla_head_block`` query heads where the kernel blocks them
    (``kv_read_amplification``).
    """
    args = (model, strategy, p, gpu, params, kv_format, bandwidth_efficiency, attention_dp,
            gqa_kv_read_exponent, mla_head_block)
    full = _decode_attention_keys_time_s(*args, p.seq_kv)
    if model.sliding_window is None:
        return full
    share = sliding_window_share(model)
    windowed = _decode_attention_keys_time_s(*args, np.minimum(p.seq_kv, model.sliding_window))
    return share * windowed + (1 - share) * full


def _decode_attention_keys_time_s(model, strategy, p, gpu, params, kv_format,
                                  bandwidth_efficiency, attention_dp, gqa_kv_read_exponent,
                                  mla_head_block, keys):
    """``decode_attention_time_s`` of a layer whose queries read ``keys`` cached tokens."""
    heads = model.num_attention_heads / (1 if attention_dp else strategy.tp)
    if model.is_mla:
        d_qk = (model.kv_lora_rank or 0) + (model.qk_rope_head_dim or 0)
        d_v = float(model.kv_lora_rank or 0)
    else:
        d_qk, d_v = head_dims(model)
    flops = attention_flops(p.num_seqs, heads, p.seq_q, keys, d_qk, d_v, False, False)
    tp = 1 if attention_dp else strategy.tp
    reads = kv_read_amplification(model, heads, max(model.num_kv_heads / tp, 1.0),
                                  gqa_kv_read_exponent, mla_head_block)
    kv_bytes = reads * p.num_seqs * np.multiply(keys, kv_bytes_per_token_per_layer(
        model, strategy, kv_format, attention_dp))
    qo_bytes = p.num_seqs * p.seq_q * heads * (d_qk + d_v) * 2.0
    curve = params.attention_forward
    return attention_roofline_time_s(
        flops, kv_bytes + qo_bytes, attention_keys_per_query(1, keys, False), 0.5 * (d_qk + d_v),
        gpu.peak_flops("bf16"), gpu.hbm_bandwidth_Bps, curve.eff_max, curve.keys_half,
        curve.head_dim_half, params.hbm_efficiency.value * bandwidth_efficiency,
        params.launch_overhead_s.value)


def prefill_attention_time_s(model: ModelSpec, strategy: Strategy, p: AttentionPass,
                             gpu: GPUSpec, backend: KernelBackend, precision: InferencePrecision,
                             attention_dp: bool = False):
    """Causal flash-attention forward of a prefill pass (16-bit; backend's own time)."""
    op = attention_op(model, strategy, p, attention_dp)
    fmt = "fp16" if precision.activations == "fp16" else "bf16"

    def time_s(op):
        return backend.attention_time_s(gpu, op.batch, op.heads, op.seq_q,
                                        attention_kernel_keys(op, gpu), op.head_dim_qk,
                                        op.head_dim_v, op.kernel_causal, False, fmt,
                                        kernel=strategy.attention_kernel)

    full = time_s(replace(op, window=None))
    if op.window is None:
        return full
    # Windowed layers (key-block granularity, schedule.op_time) and full ones, per average layer.
    share = sliding_window_share(model)
    return share * time_s(op) + (1 - share) * full
