"""A GPU generation whose kernel constants of one class were transferred from another
generation says so (issue 21: "never fall back silently ... to another vendor's constants").

CDNA3 has fitted GEMM blocks but no attention measurement: its attention constants come from
Hopper (``calibration/kernel_analytical.yaml`` and ``kernel_roofline.yaml`` provenance
``transferred``); train and infer name them in ``calibration.stand_ins`` and the text.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from perfcast.calibration.kernel_analytical import load_kernel_analytical
from perfcast.catalog.gpus import load_gpu
from perfcast.cli.main import app
from perfcast.kernels.analytical import AnalyticalBackend
from perfcast.kernels.roofline import RooflineBackend

runner = CliRunner()


def test_analytical_calibration_lists_transferred_classes():
    cal = load_kernel_analytical()
    cdna3 = cal.transferred_parts("cdna3")
    assert len(cdna3) == 1 and cdna3[0].startswith("attention kernel constants")
    assert "hopper" in cdna3[0]
    assert cal.transferred_parts("hopper") == ()


def test_backends_list_what_they_borrow():
    mi300x, h100 = load_gpu("mi300x"), load_gpu("h100-sxm")
    assert AnalyticalBackend().transferred_parts(h100) == ()
    assert any("attention" in p for p in AnalyticalBackend().transferred_parts(mi300x))
    roofline = RooflineBackend()
    assert roofline.transferred_parts(h100) == ()
    names = roofline.transferred_parts(mi300x)
    assert [n.split(" constants")[0] for n in names] == ["attention forward",
                                                        "attention backward"]


def test_train_and_infer_name_the_transferred_attention_constants():
    for command in (["train", "-m", "llama-3-8b", "-g", "8"], ["infer", "-m", "llama-3-8b"]):
        result = runner.invoke(app, [*command, "--gpu", "mi300x", "--json"])
        assert result.exit_code == 0, result.output
        stand_ins = json.loads(result.stdout)["calibration"]["stand_ins"]
        assert any("attention" in s and "hopper" in s.lower() for s in stand_ins), stand_ins
        text = runner.invoke(app, [*command, "--gpu", "mi300x"]).stdout
        assert "attention" in " ".join(text.split()) and "stand in" in " ".join(text.split())
        h100 = runner.invoke(app, [*command, "--gpu", "h100-sxm", "--json"])
        assert json.loads(h100.stdout)["calibration"]["stand_ins"] == []
