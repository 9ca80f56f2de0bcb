"""Pictures and the HTML report (issue 22), tested on the matplotlib objects (Agg) and the
parsed HTML: every figure titled with model/system/strategy, distinct colours, plain integer
GPU ticks, labels that do not overlap, sane memory axes; the HTML states every input, the
assumptions, command line and version, shows percentages, no Python None/True/False, and no
MoE fields for a dense model."""

from __future__ import annotations

import itertools
import re
from html.parser import HTMLParser

import pytest

pytest.importorskip("matplotlib")

from cli_fuzz import invoke  # noqa: E402
from perfcast.catalog.models import load_model  # noqa: E402
from perfcast.catalog.systems import load_system  # noqa: E402
from perfcast.estimate.training import estimate_training  # noqa: E402
from perfcast.estimate.training_timeline import (  # noqa: E402
    stage_operator_points,
    training_timeline,
)
from perfcast.specs.strategy import Strategy  # noqa: E402
from perfcast.specs.workload import Workload  # noqa: E402


@pytest.fixture(scope="module")
def step():
    from perfcast.report.plots import step_figures

    model = load_model("llama3-8b")
    strategy = Strategy(num_gpus=16, tp=2, pp=4, sequence_parallel=True)
    system = load_system("dgx-h100", num_gpus=16)
    report = estimate_training(model, system, strategy, Workload(seq_length=2048,
                                                                 global_batch_size=32))
    timeline = training_timeline(report)
    points = stage_operator_points(model, system, strategy, 2048, report.critical_stage,
                                   report.kernel_backend)
    figures = step_figures(report, timeline, points, system.gpu.hbm_bandwidth_Bps)
    yield report, figures
    from perfcast.report.plots import _pyplot

    for fig in figures.values():
        _pyplot().close(fig)


def test_every_step_figure_is_titled_with_the_run(step) -> None:
    report, figures = step
    assert set(figures) == {"gantt", "memory_over_time", "time_breakdown", "memory_breakdown",
                            "roofline"}
    for name, fig in figures.items():
        title = fig._suptitle.get_text()
        for word in (report.model, report.system, report.gpu, "TP 2", "PP 4", "DP 2"):
            assert word in title, (name, title)


def test_memory_breakdown_axes(step) -> None:
    report, figures = step
    ax = figures["memory_breakdown"].axes[0]
    stages = [st.stage for st in report.memory.stages]
    assert [t for t in ax.get_xticks()] == stages
    low, high = ax.get_xlim()
    assert min(stages) - 1 < low < min(stages) and max(stages) < high < max(stages) + 1
    assert ax.get_ylim()[0] == 0
    assert ax.get_ylim()[1] >= report.memory.capacity_bytes / 2**30


@pytest.fixture(scope="module")
def sweep_figs():
    from perfcast.report.sweep_plots import sweep_figures
    from perfcast.search.sweep import run_sweep, sweep_tasks

    tasks = sweep_tasks("llama3-8b", ["dgx-h100", "dgx-a100"], [8, 16, 32], 64, 4096)
    rows = run_sweep(tasks)
    figures = sweep_figures(rows)
    yield figures
    from perfcast.report.sweep_plots import _pyplot

    for fig in figures.values():
        _pyplot().close(fig)


def test_sweep_figures_are_titled(sweep_figs) -> None:
    for name, fig in sweep_figs.items():
        title = fig.axes[0].get_title()
        assert "llama3-8b" in title and "dgx-h100" in title and "dgx-a100" in title, name


def test_throughput_ticks_are_plain_integers(sweep_figs) -> None:
    fig = sweep_figs["throughput_vs_gpus"]
    fig.canvas.draw()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["8", "16", "32"]
    assert all(t.get_text() == "" for t in ax.get_xminorticklabels())


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_breakdown_colours_distinct_and_labels_apart(sweep_figs) -> None:
    fig = sweep_figs["time_breakdown"]
    ax = fig.axes[0]
    colours = [tuple(container.patches[0].get_facecolor()) for container in ax.containers]
    assert len(colours) >= 5 and len(set(colours)) == len(colours)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels()]
    assert len(boxes) == 6
    for a, b in itertools.combinations(boxes, 2):
        assert not _overlap(a, b)
    legend = ax.get_legend().get_window_extent(renderer)
    assert not _overlap(legend, ax.get_window_extent(renderer))
    assert all("TP" in t.get_text() and "DP" in t.get_text() for t in ax.get_xticklabels())


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag, attrs) -> None:
        self.skip += tag in ("svg", "style")

    def handle_endtag(self, tag) -> None:
        self.skip -= tag in ("svg", "style")

    def handle_data(self, data) -> None:
        if not self.skip:
            self.parts.append(data)


def _html_text(path) -> str:
    parser = _Text()
    parser.feed(path.read_text())
    return " ".join(" ".join(parser.parts).split())


@pytest.mark.parametrize(("model", "extra", "moe"), [
    ("llama3-8b", ["--tp", "2"], False),
    ("mixtral-8x7b", ["--tp", "2", "--ep", "4", "--use-distributed-optimizer"], True),
])
def test_html_report_states_inputs_and_formats_values(tmp_path, model, extra, moe) -> None:
    from perfcast import __version__

    path = tmp_path / "r.html"
    args = ["train", "-m", model, "--gpus", "8", *extra, "--seq-length", "2048",
            "--report", str(path)]
    result = invoke(args, limit_s=60)
    assert result.exit_code == 0, result.stderr
    text = _html_text(path)
    for needed in ("system dgx-h100", "sequence length (tokens) 2,048",
                   "global batch (sequences)", "kernel backend analytical", "Assumptions",
                   f"perfcast {__version__}", "command: perfcast train -m " + model):
        assert needed in text, needed
    assert re.search(r"MFU \(of dense BF16 peak\) \d+\.\d%", text)
    assert not re.search(r"\b(None|True|False|nan)\b", text)
    assert ("moe_load_imbalance" in text) is moe and ("ep_overlap" in text) is moe
    assert "fp8_recipe" not in text
