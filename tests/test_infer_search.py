"""``perfcast infer-search`` (issue 19): the reported deployments are forecast exactly as
``perfcast infer`` forecasts them, they meet the targets and are ranked, the Pareto front is
non-dominated, the bulk screen is the array form of the same formulas, disaggregated pools add
up, and the done-when searches run in time."""

from __future__ import annotations

import json
import shlex
import time

import numpy as np
import pytest
from typer.testing import CliRunner

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.serving_search import Deployment, InstanceLayout, Targets, search_deployments
from perfcast.serving_search.bulk import screen_aggregated, screen_disaggregated
from perfcast.serving_search.exact import evaluate
from perfcast.serving_search.run import layout_tables
from perfcast.serving_search.screen import closed_loop, disaggregated
from perfcast.serving_search.space import instance_layouts
from perfcast.serving_search.transfer import kv_transfer_bytes, kv_transfer_s

LLAMA = ("infer-search -m llama-3.1-70b -s dgx-h100 --gpus 8 --input-len 1024 --output-len 1024 "
         "--tpot-ms 50 --top 5 --json")


def _run(command: str) -> dict:
    result = CliRunner().invoke(app, shlex.split(command))
    assert result.exit_code == 0, result.output[-500:]
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def llama() -> tuple[dict, float]:
    """The done-when search, with the CPU seconds it took."""
    start = time.process_time()
    out = _run(LLAMA)
    return out, time.process_time() - start


def test_llama_70b_on_8_h100_runs_in_5_s_and_infer_reproduces_every_ranked_deployment(llama):
    out, cpu_s = llama
    assert cpu_s <= 5.0
    assert out["evaluated"] > 300 and 1 <= len(out["best"]) <= 5
    for entry in out["best"]:
        dep = entry["deployment"]
        assert dep["mode"] == "aggregated" and dep["num_gpus"] == 8
        args = ["infer", "-m", "llama-3.1-70b", "-s", "dgx-h100", "--gpus", "8",
                "--tp", str(dep["tp"]), "--pp", str(dep["pp"]), "--ep", str(dep["ep"]),
                "--precision", dep["precision"], "--kv-precision", dep["kv_precision"],
                "--input-len", "1024", "--output-len", "1024",
                "--concurrency", str(dep["concurrency"]), "--engine", "vllm", "--json"]
        args += ["--attention-dp"] if dep["attention_dp"] else []
        infer = _run(shlex.join(args))
        for key in ("ttft_s", "tpot_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu"):
            assert entry[key] == pytest.approx(infer[key], rel=1e-9, abs=0), key
        assert entry["output_tokens_per_s_per_user"] == pytest.approx(1.0 / infer["tpot_s"],
                                                                      rel=1e-12)


def test_ranked_deployments_meet_the_targets_best_first_and_the_front_is_non_dominated(llama):
    out, _ = llama
    best = out["best"]
    assert all(b["meets_targets"] and b["tpot_s"] <= 0.050 for b in best)
    rates = [b["output_tokens_per_s_per_gpu"] for b in best]
    assert rates == sorted(rates, reverse=True)
    assert out["best_by_mode"]["aggregated"] == best[0]
    front = out["pareto"]
    assert len(front) >= 3
    for p in front:
        for q in front:
            assert not (q["output_tokens_per_s_per_gpu"] > p["output_tokens_per_s_per_gpu"]
                        and q["output_tokens_per_s_per_user"] > p["output_tokens_per_s_per_user"])
    # a faster user speed costs throughput per GPU along the front
    per_user = [p["output_tokens_per_s_per_user"] for p in front]
    assert per_user == sorted(per_user)


def test_targets_filter_the_ranking():
    model, system = load_model("llama-3.1-70b"), load_system("dgx-h100")
    loose = search_deployments(model, system, 8, 1024, 256, top=3)
    tight = search_deployments(model, system, 8, 1024, 256, top=3,
                               targets=Targets(ttft_s=0.5, min_tokens_per_s_per_user=80.0))
    assert tight.best and all(r.ttft_s <= 0.5 and r.output_tokens_per_s_per_user >= 80.0
                              for r in tight.best)
    assert loose.best[0].output_tokens_per_s_per_gpu > tight.best[0].output_tokens_per_s_per_gpu
    impossible = search_deployments(model, system, 8, 1024, 256,
                                    targets=Targets(tpot_s=1e-4))
    assert impossible.best == () and impossible.feasible == 0


def test_bulk_screen_is_the_array_form_of_the_scalar_formulas():
    model, system = load_model("mixtral-8x7b"), load_system("dgx-h100").with_num_gpus(16)
    tables = layout_tables(model, system, 16, 512, 256, "vllm")
    agg = screen_aggregated(tables, 16, 256)
    for i in np.random.default_rng(0).choice(len(agg), 20, replace=False):
        t = tables[int(agg.decode_idx[i])]
        clients = float(t.levels[int(agg.level_idx[i])])
        running = min(clients, t.max_seqs)
        j = int(np.log2(running))
        w = np.log2(running) - j
        hi = min(j + 1, len(t.levels) - 1)
        decode = t.decode_s[j] * (1 - w) + t.decode_s[hi] * w
        one = closed_loop(t.prefill_s, t.prefill_rate_per_s, decode, running, clients, 256,
                          t.wait_steps, t.layout.gpus)
        assert float(one.ttft_s) == pytest.approx(agg.metrics.ttft_s[i], rel=1e-12)
        assert float(one.output_tokens_per_s_per_gpu) == pytest.approx(
            agg.metrics.output_tokens_per_s_per_gpu[i], rel=1e-12)
    dis = screen_disaggregated(tables, 16, 256, lambda p, d: kv_transfer_s(
        model, system, p.layout, d.layout, 512))
    assert len(dis) > len(agg)
    for i in np.random.default_rng(1).choice(len(dis), 20, replace=False):
        p, d = tables[int(dis.prefill_idx[i])], tables[int(dis.decode_idx[i])]
        x, y = int(dis.prefill_instances[i]), int(dis.instances[i])
        assert x * p.layout.gpus + y * d.layout.gpus == 16
        b = d.levels[int(dis.level_idx[i])]
        assert b <= d.max_seqs
        one = disaggregated(p.prefill_s, p.prefill_rate_per_s,
                            kv_transfer_s(model, system, p.layout, d.layout, 512),
                            d.decode_s[int(dis.level_idx[i])], b, x, y, 256, 16.0)
        assert float(one.tpot_s) == dis.metrics.tpot_s[i]
        assert float(one.output_tokens_per_s_per_gpu) == pytest.approx(
            dis.metrics.output_tokens_per_s_per_gpu[i], rel=1e-12)


def test_screen_ranks_like_the_simulation():
    """The screen only chooses what to re-score, but it must order deployments roughly as the
    simulation does: tokens/s/GPU within 0.5–1.5× of the exact value on random deployments."""
    model, system = load_model("llama-3.1-70b"), load_system("dgx-h100").with_num_gpus(8)
    tables = layout_tables(model, system, 8, 1024, 1024, "vllm")
    agg = screen_aggregated(tables, 8, 1024)
    ratios = []
    for i in np.random.default_rng(2).choice(len(agg), 15, replace=False):
        exact = evaluate(model, system, agg.deployment(tables, int(i)), 1024, 1024, "vllm",
                         Targets())
        ratios.append(agg.metrics.output_tokens_per_s_per_gpu[i] / exact.output_tokens_per_s_per_gpu)
    assert 0.5 < min(ratios) and max(ratios) < 1.5 and 0.85 < np.median(ratios) < 1.15


def test_disaggregated_pools_add_up():
    model, system = load_model("llama-3.1-70b"), load_system("dgx-h100").with_num_gpus(16)
    lay = InstanceLayout(tp=4, pp=1, ep=1, attention_dp=False, precision="fp8",
                         kv_precision="fp8")
    dep = Deployment("disaggregated", lay, instances=2, concurrency=2 * 64, prefill=lay,
                     prefill_instances=2)
    assert dep.num_gpus == 16 and dep.decode_batch == 64
    r = evaluate(model, system, dep, 2048, 512, "vllm", Targets())
    assert r.fits and r.kv_transfer_s > 0 and r.ttft_s > r.kv_transfer_s
    # 2048 tokens x 80 layers x 8 KV heads x 128 x 2 (K, V) x 1 byte (fp8)
    assert kv_transfer_bytes(model, "fp8", 2048) == 2048 * 80 * 8 * 128 * 2
    # the decode pool alone sets TPOT; the prefill pool keeps up at this load, so throughput
    # is the decode pool's: y*b sequences each emitting a token per TPOT
    assert r.output_tokens_per_s == pytest.approx(2 * 64 / r.tpot_s * 512 / 511, rel=1e-9)
    starved = Deployment("disaggregated", InstanceLayout(8, 1, 1, False, "fp8", "fp8"), 1,
                         512, prefill=InstanceLayout(1, 8, 1, False, "fp8", "fp8"),
                         prefill_instances=1)
    slow = evaluate(model, system, starved, 2048, 512, "vllm", Targets())
    assert slow.output_tokens_per_s < 512 / slow.tpot_s * 512 / 511  # prefill-bound


def test_deepseek_v3_on_32_h200_disaggregated_reports_both_modes_in_30_s():
    start = time.process_time()
    out = _run("infer-search -m deepseek-v3 -s dgx-h200 --gpus 32 --input-len 1024 "
               "--output-len 1024 --tpot-ms 50 --disaggregated --top 3 --json")
    assert time.process_time() - start <= 30.0
    agg, dis = out["best_by_mode"]["aggregated"], out["best_by_mode"]["disaggregated"]
    assert agg["deployment"]["mode"] == "aggregated" and agg["tpot_s"] <= 0.05
    assert dis["deployment"]["mode"] == "disaggregated" and dis["tpot_s"] <= 0.05
    pools = dis["deployment"]
    assert (pools["prefill"]["instances"] * pools["prefill"]["tp"] * pools["prefill"]["pp"]
            + pools["decode"]["instances"] * pools["decode"]["tp"] * pools["decode"]["pp"]) == 32
    assert out["evaluated"] > 10_000
    lay = agg["deployment"]  # attention DP / EP layouts reproduce through infer too
    args = ["infer", "-m", "deepseek-v3", "-s", "dgx-h200", "--gpus", "32", "--tp",
            str(lay["tp"]), "--pp", str(lay["pp"]), "--ep", str(lay["ep"]), "--precision",
            lay["precision"], "--kv-precision", lay["kv_precision"], "--input-len", "1024",
            "--output-len", "1024", "--concurrency", str(lay["concurrency"]), "--json"]
    infer = _run(shlex.join(args + (["--attention-dp"] if lay["attention_dp"] else [])))
    for key in ("ttft_s", "tpot_s", "output_tokens_per_s_per_gpu"):
        assert agg[key] == pytest.approx(infer[key], rel=1e-9, abs=0), key
    assert {p["deployment"]["mode"] for p in out["pareto_by_mode"]["disaggregated"]} == \
        {"disaggregated"}


def test_layouts_follow_the_gpu_and_the_model():
    a100 = load_system("dgx-a100")
    dense = instance_layouts(load_model("llama-3.1-70b"), a100, 8)
    assert {lay.precision for lay in dense} == {"bf16"}  # no FP8 tensor cores on A100
    assert {lay.kv_precision for lay in dense} == {"bf16"}
    assert all(lay.ep == 1 and not lay.attention_dp for lay in dense)
    assert max(lay.tp for lay in dense) == 8
    moe = instance_layouts(load_model("mixtral-8x7b"), load_system("dgx-b200"), 16)
    assert {lay.precision for lay in moe} == {"bf16", "fp8", "fp4"}
    assert all(lay.tp % lay.ep == 0 and lay.tp <= 8 for lay in moe)
    assert any(lay.attention_dp for lay in moe) and any(lay.pp == 2 for lay in moe)


@pytest.mark.parametrize(("args", "field"), [
    ("--gpus 0", "gpus"), ("--gpus 8 --tpot-ms nan", "tpot"), ("--gpus 8 --ttft-ms -5", "ttft_ms"),
    ("--gpus 8 --min-tokens-per-s-per-user inf", "min-tokens"), ("--gpus 9999999", "gpus"),
    ("--gpus 8 --input-len 0", "input_len"), ("--gpus 8 --top 0", "top"),
    ("--gpus 8 --engine tgi", "engine"), ("--gpus 8 --plot out.txt", "plot"),
])
def test_bad_input_is_one_line_exit_2(args, field):
    result = CliRunner().invoke(app, shlex.split(f"infer-search -m llama3-8b {args}"))
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "Traceback" not in result.output


def test_text_report_starts_with_the_verdict_and_prints_the_infer_line():
    result = CliRunner().invoke(app, shlex.split(
        "infer-search -m llama3-8b -s dgx-h100 --gpus 2 --input-len 512 --output-len 128 "
        "--ttft-ms 200 --engine sglang --top 2"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("best: ") and "(TTFT ≤ 200 ms)" in lines[0]
    assert any(line.startswith("reproduce the best aggregated deployment: perfcast infer ")
               and "--engine sglang" in line for line in lines)


def test_plot_draws_both_fronts(tmp_path):
    from perfcast.report.infer_search_plot import plot_fronts

    result = search_deployments(load_model("mixtral-8x7b"), load_system("dgx-h100"), 16, 512,
                                128, targets=Targets(tpot_s=0.03), disaggregated=True, top=2)
    assert result.pareto_of("aggregated") and result.pareto_of("disaggregated")
    out = plot_fronts(result, tmp_path / "fronts.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
