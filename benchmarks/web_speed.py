"""``perfcast serve`` speed: startup and a Train forecast after a change (issue 20 targets:
startup <= 1 s, Train render <= 300 ms after a change).

    python benchmarks/web_speed.py [--repeats 5] [--no-browser]

startup_s: from launching ``perfcast serve`` to the first answered ``GET /train`` (a fresh
process each time). api_train_ms: one ``GET /api/train`` on a warm server (the forecast and its
JSON). render_ms: in headless Chromium, from the keystroke that changes TP on the Train page to
the drawn result (the 80 ms debounce, the request, the forecast and the drawing);
gantt_after_render_ms: then the pipeline Gantt (``perfcast train --trace``, a second request).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

TRAIN_QUERY = "model=llama-3-70b&system=dgx-h100&gpus=64&tp=8&pp=4&distributed_optimizer=on"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()


def _wait_up(url: str, deadline_s: float = 20.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            _get(url)
            return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"{url} did not answer within {deadline_s} s")


def _start(port: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "perfcast.cli.main", "serve", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def startup_s(repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        port = _free_port()
        start = time.perf_counter()
        process = _start(port)
        try:
            _wait_up(f"http://127.0.0.1:{port}/train")
            times.append(time.perf_counter() - start)
        finally:
            process.terminate()
            process.wait(timeout=10)
    return times


def api_train_ms(base: str, repeats: int) -> list[float]:
    _get(f"{base}/api/train?{TRAIN_QUERY}")  # first call imports the estimators
    times = []
    for tp in [8, 4, 2, 1, 8, 4, 2, 1][:max(repeats, 1)]:
        start = time.perf_counter()
        _get(f"{base}/api/train?{TRAIN_QUERY.replace('tp=8', f'tp={tp}')}")
        times.append(1000 * (time.perf_counter() - start))
    return times


def render_ms(base: str, repeats: int) -> list[float]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    times, gantt = [], []
    try:
        driver.get(f"{base}/train?{TRAIN_QUERY}")
        WebDriverWait(driver, 60).until(
            lambda d: d.execute_script("return document.body.dataset.state") == "done")
        field = driver.find_element(By.ID, "f-tp")
        for i in range(repeats):
            driver.execute_script("delete document.body.dataset.changeToRenderMs")
            field.send_keys("\b" + ("4" if i % 2 == 0 else "8"))  # one keystroke changes tp
            WebDriverWait(driver, 60).until(
                lambda d: d.execute_script("return document.body.dataset.changeToRenderMs"))
            times.append(float(driver.execute_script("return document.body.dataset.changeToRenderMs")))
            WebDriverWait(driver, 60).until(lambda d: d.execute_script(
                "return document.querySelector('#gantt svg') && document.body.dataset.ganttMs"))
            gantt.append(float(driver.execute_script("return document.body.dataset.ganttMs")))
    finally:
        driver.quit()
    return times, gantt


def _line(name: str, values: list[float], unit: str) -> None:
    print(f"{name}_median: {statistics.median(values):.3f} {unit}  (min {min(values):.3f}, "
          f"max {max(values):.3f}, n={len(values)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-browser", action="store_true")
    ns = parser.parse_args()
    _line("startup_s", startup_s(ns.repeats), "s (target <= 1)")
    port = _free_port()
    process = _start(port)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_up(f"{base}/train")
        _line("api_train_ms", api_train_ms(base, ns.repeats), "ms")
        if not ns.no_browser:
            render, gantt = render_ms(base, ns.repeats)
            _line("render_ms", render, "ms (target <= 300)")
            _line("gantt_after_render_ms", gantt, "ms (the pipeline Gantt, a second request)")
    finally:
        process.terminate()
        process.wait(timeout=10)


if __name__ == "__main__":
    main()
