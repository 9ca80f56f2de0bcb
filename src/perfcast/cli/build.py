"""Turn command-line ``RunArgs`` into typed specs (the only place the CLI builds specs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perfcast.cli.options import RunArgs, strategy_dispatcher
from perfcast.errors import InputError
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload

DEFAULT_MICRO_BATCHES_PER_STAGE = 4
"""Default global batch with pipelining: 4·pp micro-batches per step keeps the 1F1B bubble
(p−1)/m below 25%, the regime Narayanan et al. 2021 §3.3 recommend; without PP one micro-batch."""


@dataclass(frozen=True)
class RunSpecs:
    model: ModelSpec
    system: SystemSpec
    strategy: Strategy
    workload: Workload


def build_specs(args: RunArgs) -> RunSpecs:
    """Resolve catalog names and validate the strategy; raises InputError / ValidationError."""
    from perfcast.catalog.models import load_model
    from perfcast.catalog.systems import load_system
    from perfcast.specs.compat import check_strategy_for_model, check_workload_for_strategy

    model = load_model(args.model)
    gpus = args.gpus if args.gpus is not None else args.tp * args.pp * args.cp
    if gpus <= 0:
        raise InputError("gpus", gpus, "must be a positive number of GPUs")
    system = load_system(args.system, num_gpus=gpus)
    if args.gpu_clock_mhz is not None:
        system = system.model_copy(update={"gpu": system.gpu.with_clock(args.gpu_clock_mhz * 1e6)})
    strategy = Strategy(
        num_gpus=gpus,
        tp=args.tp,
        pp=args.pp,
        vpp=args.vpp,
        cp=args.cp,
        ep=args.ep,
        etp=args.etp,
        sequence_parallel=args.sequence_parallel,
        zero_stage=args.zero_stage,
        fsdp=args.fsdp,
        distributed_optimizer=args.distributed_optimizer,
        recompute=args.recompute,
        recompute_num_layers=args.recompute_num_layers,
        micro_batch_size=args.micro_batch_size,
        precision=args.precision,
        fp8_recipe=args.fp8_recipe,
        fp8_fused_casts=args.fp8_fused_casts,
        fp8_weight_cache=args.fp8_weight_cache,
        grad_reduce_dtype=args.grad_reduce_dtype,
        flash_attention=not args.no_flash_attention,
        attention_kernel=args.attention_kernel,
        mtp_num_layers=args.mtp_num_layers,
        make_vocab_size_divisible_by=args.make_vocab_size_divisible_by,
        moe_token_dispatcher=strategy_dispatcher(args.moe_token_dispatcher),
        moe_load_imbalance=args.moe_load_imbalance,
        moe_grouped_gemm=args.moe_grouped_gemm,
        moe_capacity_factor=args.moe_capacity_factor,
        placement_order=args.placement_order,
        tp_comm_overlap=args.tp_comm_overlap,
        ep_overlap=args.ep_overlap,
    )
    if strategy.precision == "fp8" and not system.gpu.supports("fp8"):
        raise InputError("precision", "fp8", f"gpu {system.gpu.name!r} has no FP8 tensor cores")
    if strategy.precision == "fp8" and strategy.fp8_recipe == "mxfp8" and not system.gpu.mx_block_scaling:
        raise InputError("fp8_recipe", "mxfp8", f"MX block scaling needs Blackwell-class tensor cores; "
                         f"gpu {system.gpu.name!r} is {system.gpu.generation}")
    if strategy.precision == "fp8" and strategy.fp8_recipe == "nvfp4" and not system.gpu.nvfp4:
        raise InputError("fp8_recipe", "nvfp4", f"NVFP4 needs NVIDIA Blackwell FP4 tensor cores; "
                         f"gpu {system.gpu.name!r} is {system.gpu.generation}")
    gbs = args.global_batch_size
    if gbs is None:
        per_stage = DEFAULT_MICRO_BATCHES_PER_STAGE * args.pp if args.pp > 1 else 1
        gbs = args.micro_batch_size * strategy.dp * per_stage
    workload = Workload(seq_length=args.seq_length, global_batch_size=gbs)
    check_strategy_for_model(model, strategy)
    check_workload_for_strategy(workload, strategy)
    return RunSpecs(model=model, system=system, strategy=strategy, workload=workload)


def kernel_backend(name: str, table: Path | None = None):
    """The kernel backend named ``name`` (``--kernel-backend``); with ``--kernel-table``, a
    measured backend over that table (``InputError`` if the name is not ``measured``)."""
    from perfcast.kernels.backend import get_backend

    if table is None:
        return get_backend(name)
    if name != "measured":
        raise InputError("kernel_table", str(table), "needs --kernel-backend measured")
    from perfcast.kernels.measured import measured_backend_for_table

    return measured_backend_for_table(str(table))
