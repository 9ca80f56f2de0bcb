"""Checks that a strategy can exist for a given model and workload.

A strategy that cannot exist (TP not dividing heads, layers not splitting over stages, a global
batch that is not a whole number of micro-batches per DP rank) raises ``InputError`` naming the
values. A strategy that merely does not fit in memory is not checked here: it is a result.
"""

from __future__ import annotations

from perfcast.errors import InputError
from perfcast.specs.model import ModelSpec
from perfcast.specs.pipeline_layout import chunk_layer_counts, has_custom_split
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload


def check_strategy_for_model(model: ModelSpec, strategy: Strategy) -> None:
    """Raise ``InputError`` if ``strategy`` cannot shard ``model`` (Megatron-LM constraints)."""
    tp = strategy.tp
    if model.num_attention_heads % tp != 0:
        raise InputError(
            "tp", tp, f"does not divide num_attention_heads={model.num_attention_heads} "
            f"of model {model.name!r}"
        )
    kv = model.num_kv_heads
    if not model.is_mla and kv % tp != 0 and tp % kv != 0:
        raise InputError(
            "tp", tp, f"neither divides nor is a multiple of num_key_value_heads={kv} "
            f"of model {model.name!r}"
        )
    _check_context_parallel_heads(model, strategy)
    _check_tensor_parallel_2d(model, strategy)
    if (strategy.recompute == "selective" and "mla_up_proj" in strategy.recompute_modules
            and not model.is_mla):
        raise InputError("recompute_modules", ",".join(strategy.recompute_modules),
                         f"mla_up_proj needs multi-latent attention; model {model.name!r} has none")
    chunks = strategy.pp * strategy.vpp
    if has_custom_split(strategy):
        # Megatron-Core's explicit splits (specs.pipeline_layout) may leave a chunk empty.
        chunk_layer_counts(model.num_hidden_layers, strategy)
    elif chunks > model.num_hidden_layers:
        raise InputError(
            "pp", strategy.pp, f"pp*vpp={chunks} exceeds num_hidden_layers="
            f"{model.num_hidden_layers} of model {model.name!r} (give --pipeline-layout or "
            "first/last stage layers for a split with empty chunks)"
        )
    most_layers = -(-model.num_hidden_layers // strategy.pp)
    if strategy.recompute_num_layers is not None and strategy.recompute_num_layers > most_layers:
        raise InputError(
            "recompute_num_layers", strategy.recompute_num_layers,
            f"exceeds the {most_layers} layers per pipeline stage of model {model.name!r} "
            f"({model.num_hidden_layers} layers over pp={strategy.pp})"
        )
    if model.is_moe:
        if model.num_experts % strategy.ep != 0:
            raise InputError(
                "ep", strategy.ep, f"does not divide num_experts={model.num_experts} "
                f"of model {model.name!r}"
            )
    elif strategy.ep > 1:
        raise InputError("ep", strategy.ep, f"model {model.name!r} has no experts")


def _check_context_parallel_heads(model: ModelSpec, strategy: Strategy) -> None:
    """Ulysses all-to-all scatters the heads of each TP rank over its a2a ranks: heads/tp and
    KV heads/tp must divide by them (Transformer Engine ``attn_forward_func_with_cp`` asserts
    both for a2a and a2a+p2p; Jacobs et al. 2023 §3.1; MLA's K/V are per head)."""
    a2a = strategy.cp_a2a_size
    if a2a <= 1:
        return
    heads = model.num_attention_heads // strategy.tp
    kv = heads if model.is_mla else model.num_kv_heads // strategy.tp
    field = "cp" if strategy.cp_comm_type == "a2a" else "hierarchical_cp_a2a_size"
    if heads % a2a != 0 or kv < a2a or kv % a2a != 0:
        raise InputError(
            field, a2a, f"does not divide the {heads} attention heads and {max(kv, 0)} KV heads "
            f"per TP rank of model {model.name!r} (tp={strategy.tp}); --cp-comm-type "
            f"{strategy.cp_comm_type} scatters heads over the all-to-all ranks")


def _check_tensor_parallel_2d(model: ModelSpec, strategy: Strategy) -> None:
    """2D TP (``graph.tensor_parallel_2d``) is modelled for dense, non-MLA decoder layers, with
    whole KV heads per grid column (kv heads divisible by cols)."""
    rows = strategy.tp2d_rows
    if rows == 1:
        return
    if model.is_moe or model.is_mla:
        raise InputError("tp2d", f"{rows}x{strategy.tp2d_cols}", f"2D tensor parallelism is "
                         f"modelled for dense, non-MLA layers; model {model.name!r} has "
                         f"{'experts' if model.is_moe else 'multi-latent attention'}")
    if model.num_kv_heads % strategy.tp2d_cols != 0:
        raise InputError("tp2d", f"{rows}x{strategy.tp2d_cols}", f"cols={strategy.tp2d_cols} "
                         f"does not divide num_key_value_heads={model.num_kv_heads} of model "
                         f"{model.name!r}")


def check_workload_for_strategy(workload: Workload, strategy: Strategy) -> None:
    """Raise ``InputError`` if the global batch is not whole micro-batches on every DP rank, or
    the strategy cannot train (DeepEP's low-latency kernels are its inference-decoding path,
    DeepEP README; training dispatches with 'alltoall' or 'deepep')."""
    if strategy.moe_token_dispatcher == "deepep-low-latency":
        raise InputError("moe_token_dispatcher", strategy.moe_token_dispatcher,
                         "is DeepEP's decode-only path; train with 'alltoall' or 'deepep'")
    per_step = strategy.micro_batch_size * strategy.dp
    if workload.global_batch_size % per_step != 0:
        raise InputError(
            "global_batch_size", workload.global_batch_size,
            f"not divisible by micro_batch_size*dp={per_step} "
            f"(micro_batch_size={strategy.micro_batch_size}, dp={strategy.dp})",
        )
    if workload.seq_length % strategy.cp != 0:
        raise InputError(
            "seq_length", workload.seq_length, f"not divisible by cp={strategy.cp}"
        )


def num_micro_batches(workload: Workload, strategy: Strategy) -> int:
    """Micro-batches per optimizer step per pipeline: global batch / (micro-batch * dp)."""
    return workload.global_batch_size // (strategy.micro_batch_size * strategy.dp)
