"""``perfcast serve`` from the command line: it starts and answers; bad options exit 2."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from typer.testing import CliRunner

from perfcast.cli.main import app

runner = CliRunner()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_starts_and_answers(tmp_path):
    shipped = Path(__file__).resolve().parents[1] / "src/perfcast/calibration/training_overheads.yaml"
    shutil.copy(shipped, tmp_path / shipped.name)
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "perfcast.cli.main", "serve", "--port", str(port),
                                "--calibration", str(tmp_path)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, body = time.monotonic() + 30, None
        while body is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/train?model=llama-3-8b&gpus=8",
                                            timeout=30) as response:
                    body, command = response.read(), response.headers["X-Perfcast-Command"]
            except OSError:
                time.sleep(0.05)
        assert body is not None, "perfcast serve did not answer"
        assert command.endswith(f"--calibration {tmp_path} --json")  # serve's calibration is used
        assert b'"tokens_per_s_per_gpu"' in body
    finally:
        process.terminate()
        out, err = process.communicate(timeout=10)
    assert f"http://127.0.0.1:{port}/train" in out


def test_serve_port_in_use_is_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(app, ["serve", "--port", str(port)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: port={port}: cannot listen on 127.0.0.1:{port}")
    assert len(result.stderr.strip().splitlines()) == 1


def test_serve_bad_options_exit_2(tmp_path):
    for args in (["--port", "0"], ["--port", "70000"], ["--calibration", str(tmp_path / "none")],
                 ["--calibration", str(tmp_path)]):  # a directory without calibration files
        result = runner.invoke(app, ["serve", *args])
        assert result.exit_code == 2, args
        assert len(result.stderr.strip().splitlines()) == 1
