"""``perfcast <command>`` builds and imports only that command (issue 18 item 5)."""

from __future__ import annotations

import subprocess
import sys

import typer.main

from perfcast.cli.main import COMMANDS, app, build_app


def test_full_app_registers_every_command_of_the_table() -> None:
    group = typer.main.get_command(app)
    assert sorted(group.commands) == sorted(entry.name for entry in COMMANDS)


def test_named_app_holds_only_that_command() -> None:
    group = typer.main.get_command(build_app("train"))
    assert list(group.commands) == ["train"]


def test_train_process_imports_no_other_command_module() -> None:
    code = ("import sys; sys.argv = ['perfcast', 'train', '-m', 'llama-3-8b', '-g', '8', '--json']\n"
            "import perfcast.cli.main as m\n"
            "try:\n    m.run()\nexcept SystemExit:\n    pass\n"
            "others = [e.module for e in m.COMMANDS if e.name != 'train']\n"
            "print(sorted(n for n in others if n in sys.modules), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "[]"
    assert '"tokens_per_s_per_gpu"' in done.stdout


SERVING_ONLY = ("perfcast.calibration.inference_overheads", "perfcast.calibration.graph_replay",
                "perfcast.estimate.inference", "perfcast.estimate.serving")


def test_train_process_reads_no_serving_calibration() -> None:
    """The serving-only calibration files are read (and their modules imported) on first use
    (``calibration.bundle``): a training forecast never reads them."""
    code = ("import sys; sys.argv = ['perfcast', 'train', '-m', 'llama-3-8b', '-g', '8', '--json']\n"
            "import perfcast.cli.main as m\n"
            "try:\n    m.run()\nexcept SystemExit:\n    pass\n"
            f"print(sorted(n for n in {SERVING_ONLY!r} if n in sys.modules), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "[]"
    assert '"tokens_per_s_per_gpu"' in done.stdout
