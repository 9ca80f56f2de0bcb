"""Turn command-line ``RunArgs`` into typed specs (the only place the CLI builds specs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfcast.cli.options import RunArgs, strategy_dispatcher
from perfcast.errors import InputError
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload

DEFAULT_MICRO_BATCHES_PER_STAGE = 4
"""Default global batch with pipelining: 4·pp micro-batches per step keeps the 1F1B bubble
(p−1)/m below 25%, the regime Narayanan et al. 2021 §3.3 recommend; without PP one micro-batch."""


FRAMEWORK_OPTIONS: dict[str, str] = {
    "sequence_parallel": "sequence_parallel",
    "tp_comm_overlap": "tp_comm_overlap",
    "fsdp": "fsdp",
    "zero_stage": "zero_stage",
    "distributed_optimizer": "distributed_optimizer",
    "etp": "etp",
    "moe_token_dispatcher": "moe_token_dispatcher",
    "recompute": "recompute",
    "recompute_num_layers": "recompute_num_layers",
    "precision": "precision",
    "fp8_recipe": "fp8_recipe",
    "fp8_weight_cache": "fp8_weight_cache",
    "overlap_grad_reduce": "overlap_grad_reduce",
    "fp8_tp_gather": "fp8_tp_gather",
    "grad_reduce_dtype": "grad_reduce_dtype",
    "no_flash_attention": "flash_attention",
    "no_torch_compile": "eager_elementwise",
    "attention_kernel": "attention_kernel",
    "cp_comm_type": "cp_comm_type",
    "cp_implementation": "cp_implementation",
}
"""Command-line option -> the ``Strategy`` field a framework profile may set; an option the user
gave keeps its value (``RunArgs.explicit``)."""


@dataclass(frozen=True)
class RunSpecs:
    model: ModelSpec
    system: SystemSpec
    strategy: Strategy
    workload: Workload
    framework: str | None = None
    """Label of the framework profile applied (``--framework``), None without one."""
    assumptions: tuple[Any, ...] = ()
    """``perfcast.catalog.framework_defaults.Assumption`` per profile default applied."""

    def with_assumptions(self, report: dict[str, Any]) -> dict[str, Any]:
        """A report's JSON dict with the framework profile's assumptions added: one sentence
        with its source each, appended to ``assumptions``, and the structured list under
        ``framework_assumptions``. Unchanged without ``--framework``."""
        if self.framework is None:
            return report
        return {**report, "framework": self.framework,
                "assumptions": [*report.get("assumptions", ()), *map(str, self.assumptions)],
                "framework_assumptions": [a.to_dict() for a in self.assumptions]}


def _framework_defaults(args: RunArgs, model: ModelSpec, system: SystemSpec,
                        fields: dict[str, Any]) -> tuple[str | None, tuple[Any, ...]]:
    """Apply ``--framework`` to ``fields`` (in place); (profile label, assumptions)."""
    if args.framework is None:
        return None, ()
    from perfcast.catalog.framework_defaults import RunFacts, apply_framework_profile
    from perfcast.catalog.frameworks import load_framework_profile

    framework = load_framework_profile(args.framework)
    explicit = {field: fields[field] for option, field in FRAMEWORK_OPTIONS.items()
                if option in args.explicit}
    facts = RunFacts(tp=fields["tp"], ep=args.ep, precision=args.precision,
                     generation=system.gpu.generation,
                     layers_per_stage=max(1, model.num_hidden_layers // args.pp), cp=args.cp)
    applied = apply_framework_profile(framework, explicit, facts)
    fields.update(applied.fields)
    return framework.label, applied.assumptions


def build_specs(args: RunArgs) -> RunSpecs:
    """Resolve catalog names and validate the strategy; raises InputError / ValidationError."""
    from perfcast.catalog.models import load_model
    from perfcast.catalog.systems import load_system
    from perfcast.specs.compat import check_strategy_for_model, check_workload_for_strategy
    from perfcast.specs.limits import MAX_GPUS, check_at_most

    model = load_model(args.model)
    tp, tp2d_rows = _tp2d_grid(args.tp2d, args.tp)
    gpus = args.gpus if args.gpus is not None else tp * args.pp * args.cp
    if gpus <= 0:
        raise InputError("gpus", gpus, "must be a positive number of GPUs")
    check_at_most("gpus", gpus, MAX_GPUS)
    system = load_system(args.system, num_gpus=gpus, gpu=args.gpu)
    if args.gpu_clock_mhz is not None:
        system = system.model_copy(update={"gpu": system.gpu.with_clock(args.gpu_clock_mhz * 1e6)})
    fields: dict[str, Any] = dict(
        num_gpus=gpus,
        tp=tp,
        tp2d_rows=tp2d_rows,
        pp=args.pp,
        vpp=args.vpp,
        cp=args.cp,
        cp_comm_type=args.cp_comm_type,
        cp_implementation=args.cp_implementation,
        hierarchical_cp_a2a_size=_hierarchical_cp_a2a_size(args.hierarchical_cp_sizes, args.cp),
        ep=args.ep,
        etp=args.etp,
        pipeline_layout=args.pipeline_layout,
        num_layers_in_first_pipeline_stage=args.first_stage_layers,
        num_layers_in_last_pipeline_stage=args.last_stage_layers,
        account_for_embedding_in_pipeline_split=args.account_for_embedding,
        account_for_loss_in_pipeline_split=args.account_for_loss,
        sequence_parallel=args.sequence_parallel,
        zero_stage=args.zero_stage,
        fsdp=args.fsdp,
        distributed_optimizer=args.distributed_optimizer,
        precision_aware_optimizer=args.precision_aware_optimizer,
        store_param_remainders=args.store_param_remainders,
        exp_avg_dtype=args.exp_avg_dtype,
        exp_avg_sq_dtype=args.exp_avg_sq_dtype,
        fp8_param=args.fp8_param,
        fp8_moe_act_inputs=args.fp8_moe_act_inputs,
        recompute=_recompute(args),
        recompute_modules=_recompute_modules(args.recompute_modules),
        recompute_num_layers=args.recompute_num_layers,
        cpu_offload_activation_layers=args.cpu_offload_layers,
        offload_modules=_offload_modules(args.offload_modules),
        micro_batch_size=args.micro_batch_size,
        precision=args.precision,
        fp8_recipe=args.fp8_recipe,
        fp8_fused_casts=args.fp8_fused_casts,
        fp8_weight_cache=args.fp8_weight_cache,
        overlap_grad_reduce=args.overlap_grad_reduce,
        fp8_tp_gather=args.fp8_tp_gather,
        fp8_gemm_scope=args.fp8_gemm_scope,
        num_layers_at_start_in_bf16=args.num_layers_at_start_in_bf16,
        num_layers_at_end_in_bf16=args.num_layers_at_end_in_bf16,
        grad_reduce_dtype=args.grad_reduce_dtype,
        flash_attention=not args.no_flash_attention,
        eager_elementwise=args.no_torch_compile,
        attention_kernel=args.attention_kernel,
        mtp_num_layers=args.mtp_num_layers,
        make_vocab_size_divisible_by=args.make_vocab_size_divisible_by,
        moe_token_dispatcher=strategy_dispatcher(args.moe_token_dispatcher,
                                                 args.moe_flex_backend),
        moe_load_imbalance=args.moe_load_imbalance,
        moe_grouped_gemm=args.moe_grouped_gemm,
        moe_permute_fusion=args.moe_permute_fusion,
        moe_router_fusion=args.moe_router_fusion,
        moe_capacity_factor=args.moe_capacity_factor,
        moe_pad_expert_input_to_capacity=args.moe_pad_to_capacity,
        moe_router_force_load_balancing=args.moe_force_balance,
        placement_order=args.placement_order,
        tp_comm_overlap=args.tp_comm_overlap,
        ep_overlap=args.ep_overlap,
        cuda_graphs=args.cuda_graphs,
        delay_wgrad_compute=args.delay_wgrad_compute,
    )
    framework, assumptions = _framework_defaults(args, model, system, fields)
    strategy = Strategy(**fields)
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
    return RunSpecs(model=model, system=system, strategy=strategy, workload=workload,
                    framework=framework, assumptions=assumptions)


def _tp2d_grid(text: str | None, tp: int) -> tuple[int, int]:
    """(tp, rows) of ``--tp2d ROWSxCOLS``; (tp, 1) without it. InputError naming the text
    unless it is two positive integers whose product agrees with a --tp other than 1."""
    if text is None:
        return tp, 1
    parts = text.lower().replace("×", "x").split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise InputError("tp2d", text, "expected ROWSxCOLS, two positive integers (e.g. 2x4)")
    rows, cols = int(parts[0]), int(parts[1])
    if tp not in (1, rows * cols):
        raise InputError("tp2d", text, f"rows*cols={rows * cols} disagrees with tp={tp}")
    return rows * cols, rows


def _hierarchical_cp_a2a_size(text: str | None, cp: int) -> int | None:
    """``--hierarchical-context-parallel-sizes A,P`` (comma or space separated, Megatron's
    list of two levels) as the inner a2a size A; InputError naming the text unless it is two
    positive integers whose product is cp."""
    if text is None:
        return None
    parts = text.replace(",", " ").replace("x", " ").split()
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise InputError("hierarchical_context_parallel_sizes", text,
                         "expected two positive integers A,P (a2a ranks, ring ranks)")
    a2a, ring = int(parts[0]), int(parts[1])
    if a2a * ring != cp:
        raise InputError("hierarchical_context_parallel_sizes", text,
                         f"A*P={a2a * ring} must equal cp={cp}")
    return a2a


def _recompute_modules(text: str | None) -> tuple[str, ...]:
    """``--recompute-modules`` text (comma or space separated) as a tuple; InputError naming an
    unknown module."""
    from typing import get_args

    from perfcast.specs.strategy import RecomputeModule

    if text is None:
        return ("core_attn",)
    modules = tuple(m for m in text.replace(",", " ").split() if m)
    known = get_args(RecomputeModule)
    for module in modules:
        if module not in known:
            raise InputError("recompute_modules", module, f"unknown; choose from {', '.join(known)}")
    if not modules:
        raise InputError("recompute_modules", text, "names no module")
    return modules


def _offload_modules(text: str | None) -> tuple[str, ...]:
    """``--offload-modules`` text as a tuple; InputError naming an unknown module."""
    from typing import get_args

    from perfcast.specs.strategy import OffloadModule

    if text is None:
        return ()
    modules = tuple(m for m in text.replace(",", " ").split() if m)
    known = get_args(OffloadModule)
    for module in modules:
        if module not in known:
            raise InputError("offload_modules", module, f"unknown; choose from {', '.join(known)}")
    return modules


def _recompute(args: RunArgs) -> str:
    """``--recompute-modules`` implies selective recompute when no granularity was chosen."""
    if args.recompute_modules is not None and args.recompute == "none":
        return "selective"
    return args.recompute


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
