"""``perfcast kernels gemm|attention``: time of one kernel on one GPU, with what bounds it."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from perfcast.cli.errors import handle_input_errors
from perfcast.cli.options import (
    DEFAULT_KERNEL_BACKEND_OPT,
    SYSTEM_HELP,
    AttentionKernelOpt,
    CalibrationOption,
    GpuClockOption,
    KernelBackendOpt,
    KernelBackendOption,
    KernelTableOption,
)


class GemmPassOpt(StrEnum):
    """``graph.ops.Phase`` values a GEMM can belong to."""

    forward = "forward"
    backward_dgrad = "backward_dgrad"
    backward_wgrad = "backward_wgrad"


kernels_app = typer.Typer(help="Time one GEMM or attention kernel on one GPU.",
                          no_args_is_help=True)

SystemOption = Annotated[str, typer.Option("--system", "-s", help=SYSTEM_HELP)]
GpuOption = Annotated[str | None, typer.Option("--gpu", help="The GPU to time (catalog GPU name "
                                               "or GPU YAML file); overrides --system.")]
DtypeOption = Annotated[str, typer.Option("--dtype", help="bf16, fp16, fp8, fp4, ...")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def _gpu_and_backend(system: str, gpu: str | None, clock_mhz: float | None,
                     backend: KernelBackendOpt, table):
    """(GPU with the clock applied, kernel backend) from the shared options."""
    from perfcast.cli.build import kernel_backend as make_backend

    return _gpu(system, gpu, clock_mhz), make_backend(backend.value, table)


def _gpu(system: str, gpu_name: str | None, clock_mhz: float | None):
    """``--gpu`` (catalog GPU or GPU file), else the GPU of ``--system`` (a catalog system or
    GPU name, or a system/GPU file), clock applied."""
    from perfcast.catalog.gpus import load_gpu
    from perfcast.catalog.systems import load_system

    gpu = load_gpu(gpu_name) if gpu_name is not None else load_system(system).gpu
    return gpu.with_clock(None if clock_mhz is None else clock_mhz * 1e6)


def _emit(result, as_json: bool) -> None:
    if as_json:
        from perfcast.report.json_out import to_json

        print(to_json(result.to_dict()))
        return
    from perfcast.report.console import make_console
    from perfcast.report.kernel_text import render_kernel

    render_kernel(result, make_console())


@kernels_app.command("gemm")
@handle_input_errors
def gemm_command(
    m: Annotated[int, typer.Option("--m", min=1, help="Rows of A and C.")],
    n: Annotated[int, typer.Option("--n", min=1, help="Columns of B and C.")],
    k: Annotated[int, typer.Option("--k", min=1, help="Inner dimension.")],
    batch: Annotated[int, typer.Option("--batch", min=1, help="Batched/grouped GEMMs.")] = 1,
    gemm_pass: Annotated[GemmPassOpt | None, typer.Option(
        "--pass", help="Training pass whose layout a measured table should match "
        "(forward: m=tokens, n=out, k=in; backward_dgrad: m=tokens, n=in, k=out; "
        "backward_wgrad: m=in, n=out, k=tokens). Default: any.")] = None,
    dtype: DtypeOption = "bf16",
    system: SystemOption = "dgx-h100",
    gpu_name: GpuOption = None,
    kernel_backend: KernelBackendOption = DEFAULT_KERNEL_BACKEND_OPT,
    kernel_table: KernelTableOption = None,
    gpu_clock_mhz: GpuClockOption = None,
    json: JsonFlag = False,
) -> None:
    """Time of ``batch`` GEMMs C[m,n] = A[m,k]·B[k,n]."""
    from perfcast.report.kernel_report import gemm_kernel_report
    from perfcast.specs.limits import MAX_BATCH_SEQUENCES, MAX_GEMM_DIM, check_at_most

    for name, value in (("m", m), ("n", n), ("k", k)):
        check_at_most(name, value, MAX_GEMM_DIM)
    check_at_most("batch", batch, MAX_BATCH_SEQUENCES)
    gpu, backend = _gpu_and_backend(system, gpu_name, gpu_clock_mhz, kernel_backend, kernel_table)
    _emit(gemm_kernel_report(backend, gpu, m, n, k, batch, _precision(dtype, gpu),
                             None if gemm_pass is None else gemm_pass.value), json)


@kernels_app.command("attention")
@handle_input_errors
def attention_command(
    batch: Annotated[int, typer.Option("--batch", min=1, help="Sequences.")] = 1,
    heads: Annotated[int, typer.Option("--heads", min=1, help="Query heads.")] = 32,
    kv_heads: Annotated[int | None, typer.Option("--kv-heads", min=1,
                                                 help="K/V heads (GQA/MQA).")] = None,
    seq_q: Annotated[int, typer.Option("--seq-q", min=1, help="Query tokens.")] = 4096,
    seq_kv: Annotated[int | None, typer.Option("--seq-kv", min=1,
                                               help="Key tokens (default seq-q).")] = None,
    head_dim: Annotated[int, typer.Option("--head-dim", min=1, help="Q·K head dim.")] = 128,
    head_dim_v: Annotated[int | None, typer.Option("--head-dim-v", min=1,
                                                   help="V head dim (MLA).")] = None,
    causal: Annotated[bool, typer.Option("--causal/--full", help="Causal mask.")] = True,
    backward: Annotated[bool, typer.Option("--backward/--forward",
                                           help="Backward pass (default forward).")] = False,
    attention_kernel: Annotated[AttentionKernelOpt, typer.Option(
        "--attention-kernel", help="Kernel class: auto (the GPU's own), fa2 or triton.")
    ] = AttentionKernelOpt.auto,
    dtype: DtypeOption = "bf16",
    system: SystemOption = "dgx-h100",
    gpu_name: GpuOption = None,
    kernel_backend: KernelBackendOption = DEFAULT_KERNEL_BACKEND_OPT,
    kernel_table: KernelTableOption = None,
    gpu_clock_mhz: GpuClockOption = None,
    calibration: CalibrationOption = None,
    json: JsonFlag = False,
) -> None:
    """Time of one flash-attention forward (or backward) pass."""
    from perfcast.calibration.bundle import load_calibration
    from perfcast.errors import InputError
    from perfcast.report.kernel_report import AttentionShape, attention_kernel_report
    from perfcast.specs.limits import (
        MAX_BATCH_SEQUENCES,
        MAX_HEAD_DIM,
        MAX_HEADS,
        MAX_SEQ_LENGTH,
        check_at_most,
    )

    check_at_most("batch", batch, MAX_BATCH_SEQUENCES)
    for name, value, bound in (("heads", heads, MAX_HEADS), ("kv_heads", kv_heads or 1, MAX_HEADS),
                               ("seq_q", seq_q, MAX_SEQ_LENGTH),
                               ("seq_kv", seq_kv or 1, MAX_SEQ_LENGTH),
                               ("head_dim", head_dim, MAX_HEAD_DIM),
                               ("head_dim_v", head_dim_v or 1, MAX_HEAD_DIM)):
        check_at_most(name, value, bound)
    if kv_heads is not None and heads % kv_heads != 0:
        raise InputError("kv_heads", kv_heads, f"must divide heads={heads} (each K/V head "
                         "serves a whole group of query heads, GQA)")
    cal = load_calibration(calibration)  # derived kernel classes (attention_kernels.yaml)
    gpu, backend = _gpu_and_backend(system, gpu_name, gpu_clock_mhz, kernel_backend, kernel_table)
    backend = cal.with_kernels(backend)
    shape = AttentionShape(batch, heads, kv_heads or heads, seq_q, seq_kv or seq_q, head_dim,
                           head_dim_v or head_dim, causal, backward, attention_kernel.value)
    _emit(attention_kernel_report(backend, gpu, shape, _precision(dtype, gpu)), json)


def _precision(dtype: str, gpu):
    """``dtype`` checked against the precisions perfcast knows and those ``gpu`` has."""
    from typing import get_args

    from perfcast.errors import InputError
    from perfcast.specs.hardware import Precision

    if dtype not in get_args(Precision):
        raise InputError("dtype", dtype, f"choose from {list(get_args(Precision))}")
    if not gpu.supports(dtype):
        raise InputError("dtype", dtype, f"gpu {gpu.name!r} has no {dtype} tensor-core peak")
    return dtype
