"""A user's calibration directory and kernel table reach every serving forecast (issue 17).

``--calibration DIR`` replaces the host-launch priors (``host_launch.yaml``) and the derived
attention-kernel ratios (``attention_kernels.yaml``) of ``perfcast infer`` (static batch and
simulated stream) and ``perfcast sweep --serving``, not only the serving overheads and graph
gaps; ``sweep --serving`` and ``infer`` time kernels with ``--kernel-backend`` and a user's
``--kernel-table``; the dropless MoE routing imbalance (``moe_routing.yaml``) reaches them
too. Each directory is written from the shipped file with one value changed."""

from __future__ import annotations

import csv
import itertools
import json
import shlex
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from perfcast.calibration.attention_kernels import ATTENTION_KERNELS_PATH
from perfcast.calibration.bundle import load_calibration
from perfcast.calibration.host_launch import HOST_LAUNCH_PATH, load_host_launch
from perfcast.calibration.moe_routing import MOE_ROUTING_PATH
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.inference import estimate_inference
from perfcast.estimate.inference_kernels import gemm_time_s, roofline_params, table_gemm_time_s
from perfcast.estimate.serving import estimate_serving, serving_setup
from perfcast.graph.ops import GemmOp, Phase
from perfcast.kernels.backend import get_backend
from perfcast.kernels.kernel_table import KERNEL_TABLE_COLUMNS
from perfcast.kernels.measured import measured_backend_for_table
from perfcast.specs.inference import InferencePrecision
from perfcast.specs.serving import serving_workload
from perfcast.specs.strategy import Strategy

runner = CliRunner()
HOST_S_PER_OP = 1.0e-3
"""100x the shipped 10 us an op: eager prefill steps become host-bound."""
TRITON_HOPPER_RATIO = 2.5
"""The shipped fitted Hopper ratio is 1.437 (inside the 1.0-2.8 range of the fit)."""
ROUTING_IMBALANCE = 2.5
"""Busiest EP rank's routed tokens over the mean (shipped fit: 1.563; fit range 1-3)."""
TABLE_FACTOR = 2.0
"""The test kernel table measures every GEMM at this multiple of the analytical time."""
INFER = "infer -m llama3-8b --input-len 512 --output-len 64 --json"
SWEEP = ("sweep --serving -m llama3-8b --gpus 2 --systems dgx-h100 --input-len 512 "
         "--output-len 128 --tpot-ms 20 --json")


def _invoke(command: str):
    result = runner.invoke(app, shlex.split(command))
    assert result.exit_code == 0, result.output[-800:]
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def slow_host(tmp_path_factory) -> Path:
    """A calibration directory holding only ``host_launch.yaml``, host_s_per_op 1 ms."""
    data = yaml.safe_load(HOST_LAUNCH_PATH.read_text(encoding="utf-8"))
    data["host_s_per_op"]["value"] = HOST_S_PER_OP
    out = tmp_path_factory.mktemp("slow_host")
    (out / HOST_LAUNCH_PATH.name).write_text(yaml.safe_dump(data), encoding="utf-8")
    host = load_calibration(out).host_launch
    assert host is not None and host.host_s_per_op.value == HOST_S_PER_OP
    return out


@pytest.fixture(scope="module")
def slow_triton(tmp_path_factory) -> Path:
    """A calibration directory holding only ``attention_kernels.yaml``, the Triton attention
    kernel's Hopper ratio 2.5 instead of the fitted 1.437."""
    data = yaml.safe_load(ATTENTION_KERNELS_PATH.read_text(encoding="utf-8"))
    assert data["derived"]["triton"]["time_ratio_by_generation"]["hopper"] < TRITON_HOPPER_RATIO
    data["derived"]["triton"]["time_ratio_by_generation"]["hopper"] = TRITON_HOPPER_RATIO
    out = tmp_path_factory.mktemp("slow_triton")
    (out / ATTENTION_KERNELS_PATH.name).write_text(yaml.safe_dump(data), encoding="utf-8")
    assert load_calibration(out).attention_kernels.derived["triton"].ratio_for("hopper") == \
        TRITON_HOPPER_RATIO
    return out


@pytest.fixture(scope="module")
def gemm_table(tmp_path_factory) -> Path:
    """A kernel table of H100 GEMMs (16-bit and FP8) at the corners of a box holding every
    serving GEMM of Llama-3-8B, each measured at 2x the analytical time: inside the box the
    measured backend's interpolated ratio is 2 everywhere."""
    gpu = load_system("dgx-h100").gpu
    analytical = get_backend("analytical")
    out = tmp_path_factory.mktemp("gemm_table") / "h100_gemms.csv"
    with out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, KERNEL_TABLE_COLUMNS)
        writer.writeheader()
        for precision, m, n, k in itertools.product(("bf16", "fp8"), (1, 65536),
                                                     (256, 262144), (256, 65536)):
            time_s = TABLE_FACTOR * float(analytical.gemm_time_s(gpu, m, n, k, 1, precision))
            writer.writerow({"gpu": gpu.name, "kind": "gemm", "precision": precision, "m": m,
                             "n": n, "k": k, "batch": 1, "time_s": f"{time_s:.9e}",
                             "source": "test: 2x the analytical model"})
    return out


# --- host_launch.yaml ----------------------------------------------------------------------

def test_the_simulated_stream_takes_the_directory_host_launch(slow_host):
    shipped = _invoke(f"{INFER} --concurrency 8")
    mine = _invoke(f"{INFER} --concurrency 8 --calibration {slow_host}")
    # eager prefill steps of a Python engine are floored by ops x host_s_per_op
    assert mine["ttft_s"] > 2.0 * shipped["ttft_s"]


def test_serving_setup_takes_the_bundle_host_prior(slow_host):
    setup = serving_setup(load_model("llama3-8b"), load_system("dgx-h100", num_gpus=1),
                          Strategy(num_gpus=1), calibration=load_calibration(slow_host))
    assert setup.ctx.eager_host_s_per_op == HOST_S_PER_OP
    shipped = serving_setup(load_model("llama3-8b"), load_system("dgx-h100", num_gpus=1),
                            Strategy(num_gpus=1))
    assert shipped.ctx.eager_host_s_per_op == load_host_launch().host_s_per_op.value


def test_the_serving_sweep_takes_the_directory_host_launch(slow_host):
    shipped = _invoke(SWEEP)["rows"][0]
    mine = _invoke(f"{SWEEP} --calibration {slow_host}")["rows"][0]
    assert (mine["best_output_tokens_per_s_per_gpu"]
            < shipped["best_output_tokens_per_s_per_gpu"] * 0.95)


# --- attention_kernels.yaml ----------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True])
def test_infer_takes_the_directory_attention_ratio(slow_triton, stream):
    args = f"{INFER} --input-len 4096 --attention-kernel triton" + (
        " --concurrency 8" if stream else " --batch-size 8")
    shipped, mine = _invoke(args), _invoke(f"{args} --calibration {slow_triton}")
    assert mine["ttft_s"] > shipped["ttft_s"] * 1.05  # prefill attention 2.5/1.437 slower
    auto = _invoke(args.replace("triton", "auto"))
    auto_mine = _invoke(f"{args.replace('triton', 'auto')} --calibration {slow_triton}")
    assert auto_mine["ttft_s"] == auto["ttft_s"]  # the GPU's own kernel takes no ratio


def test_the_estimators_take_the_bundle_attention_ratio(slow_triton):
    model, system = load_model("llama3-8b"), load_system("dgx-h100", num_gpus=1)
    strategy = Strategy(num_gpus=1, attention_kernel="triton")
    mine = load_calibration(slow_triton)
    static = [estimate_inference(model, system, strategy, batch_size=8, input_len=4096,
                                 calibration=cal).ttft_s for cal in (None, mine)]
    assert static[1] > static[0] * 1.05
    workload = serving_workload(concurrency=8, request_rate=None, num_requests=None,
                                input_len=4096, output_len=64)
    stream = [estimate_serving(model, system, strategy, workload, calibration=cal).ttft.mean_s
              for cal in (None, mine)]
    assert stream[1] > stream[0] * 1.05


# --- moe_routing.yaml ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def uneven_routing(tmp_path_factory) -> Path:
    """A calibration directory holding only ``moe_routing.yaml``, dropless imbalance 2.5."""
    data = yaml.safe_load(MOE_ROUTING_PATH.read_text(encoding="utf-8"))
    assert data["dropless_load_imbalance"]["value"] < ROUTING_IMBALANCE
    data["dropless_load_imbalance"]["value"] = ROUTING_IMBALANCE
    out = tmp_path_factory.mktemp("uneven_routing")
    (out / MOE_ROUTING_PATH.name).write_text(yaml.safe_dump(data), encoding="utf-8")
    return out


@pytest.mark.parametrize("stream", [False, True])
def test_infer_takes_the_directory_moe_routing(uneven_routing, stream):
    args = ("infer -m mixtral-8x7b --tp 8 --ep 8 --input-len 2048 --output-len 64 --json"
            + (" --concurrency 64" if stream else " --batch-size 64"))
    shipped, mine = _invoke(args), _invoke(f"{args} --calibration {uneven_routing}")
    # the busiest EP rank's compute-bound prefill expert GEMMs set the step's pace
    assert mine["ttft_s"] > shipped["ttft_s"] * 1.2
    balanced = _invoke(args.replace("--ep 8", "--ep 1"))
    balanced_mine = _invoke(f"{args.replace('--ep 8', '--ep 1')} --calibration {uneven_routing}")
    assert balanced_mine["ttft_s"] == balanced["ttft_s"]  # without EP one rank holds them all


# --- kernel backend and kernel table ---------------------------------------------------------

def test_the_serving_sweep_takes_the_kernel_table(gemm_table):
    analytical = _invoke(f"{SWEEP} --kernel-backend analytical")["rows"][0]
    table = _invoke(f"{SWEEP} --kernel-backend measured --kernel-table {gemm_table}")["rows"][0]
    # every GEMM measured 2x slower: less throughput under the same TPOT target
    assert (table["best_output_tokens_per_s_per_gpu"]
            < analytical["best_output_tokens_per_s_per_gpu"] * 0.9)
    assert table["task_id"].endswith(f"|kernels=measured:{gemm_table}")
    assert analytical["task_id"].endswith("|kernels=analytical")


def test_the_serving_sweep_default_is_the_serving_backend():
    default = _invoke(SWEEP)["rows"][0]
    roofline = _invoke(f"{SWEEP} --kernel-backend roofline")["rows"][0]
    assert default == roofline
    assert "kernels=" not in default["task_id"]  # rows written before stay resumable


@pytest.mark.parametrize("stream", [False, True])
def test_infer_takes_the_kernel_table(gemm_table, stream):
    args = INFER + (" --concurrency 8" if stream else " --batch-size 8")
    analytical = _invoke(f"{args} --kernel-backend analytical")
    table = _invoke(f"{args} --kernel-backend measured --kernel-table {gemm_table}")
    assert table["tpot_s"] > analytical["tpot_s"] * 1.3  # decode is GEMM (weight) bound


def test_a_table_gemm_is_the_table_time_inside_and_the_roofline_outside(gemm_table):
    gpu = load_system("dgx-h100").gpu
    backend = measured_backend_for_table(str(gemm_table))
    params = roofline_params(backend, gpu)
    precision = InferencePrecision(weights="bf16", activations="bf16", kv_cache="bf16")
    corner = GemmOp("corner", Phase.FORWARD, 1.0, 262144.0, 65536.0, count=2)
    roofline = gemm_time_s(corner, gpu, params, precision, 1.0)
    measured = table_gemm_time_s(corner, gpu, backend, precision, roofline)
    expected = 2 * TABLE_FACTOR * float(get_backend("analytical").gemm_time_s(
        gpu, 1, 262144, 65536, 1, "bf16"))
    assert measured == pytest.approx(expected, rel=1e-6)
    outside = GemmOp("outside", Phase.FORWARD, 1.0, 128.0, 4096.0)  # n below the box
    rough = gemm_time_s(outside, gpu, params, precision, 1.0)
    assert table_gemm_time_s(outside, gpu, backend, precision, rough) == rough
    int4 = InferencePrecision(weights="int4", activations="bf16", kv_cache="bf16")
    assert table_gemm_time_s(corner, gpu, backend, int4, 1.0) == 1.0  # weight-only: roofline
    roofline_backend = get_backend("roofline")
    assert table_gemm_time_s(corner, gpu, roofline_backend, precision, roofline) == roofline


@pytest.mark.parametrize("backend", ["analytical", "measured"])
def test_every_backend_prices_a_static_serving_forecast(backend):
    """The analytical and measured backends lend the serving formulas their roofline layer's
    parameters (before: AttributeError / InputError)."""
    report = estimate_inference(load_model("llama3-8b"), load_system("dgx-h100", num_gpus=1),
                                batch_size=8, input_len=2048, kernel_backend=backend)
    roofline = estimate_inference(load_model("llama3-8b"), load_system("dgx-h100", num_gpus=1),
                                  batch_size=8, input_len=2048)
    assert report.tpot_s == pytest.approx(roofline.tpot_s, rel=1e-9)  # same GEMM formulas
    assert report.ttft_s != roofline.ttft_s  # prefill attention timed by the backend


def test_infer_search_takes_the_kernel_table_and_reproduces_it(gemm_table):
    search = "infer-search -m llama3-8b --gpus 2 --input-len 512 --output-len 128 --tpot-ms 20"
    analytical = _invoke(f"{search} --json --kernel-backend analytical")["best"][0]
    table = _invoke(f"{search} --json --kernel-backend measured "
                    f"--kernel-table {gemm_table}")["best"][0]
    assert (table["output_tokens_per_s_per_gpu"]
            < analytical["output_tokens_per_s_per_gpu"] * 0.9)
    text = runner.invoke(app, shlex.split(
        f"{search} --top 1 --kernel-backend measured --kernel-table {gemm_table}"))
    assert text.exit_code == 0, text.output[-500:]
    line = next(x for x in text.output.splitlines() if x.startswith("reproduce"))
    assert f"--kernel-backend measured --kernel-table {gemm_table}" in line
    shipped = runner.invoke(app, shlex.split(f"{search} --top 1"))
    assert "--kernel-backend" not in shipped.output  # the default leaves the line as it was


@pytest.mark.parametrize("command", [INFER + " --concurrency 8", INFER, SWEEP,
                                     "infer-search -m llama3-8b --gpus 2 --json"])
def test_a_kernel_table_without_the_measured_backend_is_one_line_exit_2_everywhere(
        gemm_table, command):
    result = runner.invoke(app, shlex.split(f"{command} --kernel-table {gemm_table}"))
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output[-500:]
    assert "kernel_table" in lines[0] and "Traceback" not in result.output


def test_the_serving_default_backend_is_one_name():
    import inspect

    from perfcast.cli.options import SERVING_KERNEL_BACKEND_OPT
    from perfcast.serving_search.sweep import SERVING_KERNEL_BACKEND

    for fn in (estimate_serving, estimate_inference, serving_setup):
        default = inspect.signature(fn).parameters["kernel_backend"].default
        assert default == SERVING_KERNEL_BACKEND == SERVING_KERNEL_BACKEND_OPT.value
