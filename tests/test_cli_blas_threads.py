"""The CLI's BLAS thread default (``perfcast.cli.blas_threads``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from perfcast.cli.blas_threads import BLAS_THREAD_VARIABLES, limit_blas_threads


def test_sets_one_thread_when_nothing_is_set() -> None:
    env: dict[str, str] = {"PATH": "/bin"}
    assert limit_blas_threads(env) is True
    assert env["OPENBLAS_NUM_THREADS"] == "1"


@pytest.mark.parametrize("name", BLAS_THREAD_VARIABLES)
def test_a_user_choice_is_kept(name: str) -> None:
    env = {name: "8"}
    assert limit_blas_threads(env) is False
    assert env == {name: "8"}


def _child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES}


def test_cli_process_runs_numpy_with_one_blas_thread() -> None:
    """``run()`` sets the variable before any command imports numpy."""
    code = ("import sys, perfcast.cli.main as m; assert 'numpy' not in sys.modules; "
            "sys.argv = ['perfcast', '--version']\n"
            "try:\n    m.run()\nexcept SystemExit:\n    pass\n"
            "import os; print(os.environ['OPENBLAS_NUM_THREADS'])")
    out = subprocess.run([sys.executable, "-c", code], env=_child_env(), check=True,
                         capture_output=True, text=True).stdout
    assert out.strip().splitlines()[-1] == "1"
