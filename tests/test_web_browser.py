"""A real browser (Debian's headless Chromium, driven by Selenium) on ``perfcast serve``'s pages.

Each page is loaded, a form field is filled, the numbers shown are checked against the CLI's
``--json`` for the same input, and a screenshot is saved (``PERFCAST_SCREENSHOT_DIR``, default
``out/screenshots``, gitignored). In CI (env ``CI`` set) a missing browser FAILS the test; locally
it skips. One browser session serves every page to keep the run short (a shared 2-core machine).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from typer.testing import CliRunner

import headless_browser
from perfcast.cli.main import app as cli_app
from perfcast.web.fields import cli_args

from web_server import running_server

SCREENSHOTS = Path(os.environ.get("PERFCAST_SCREENSHOT_DIR", "out/screenshots"))
WAIT_S = 60
runner = CliRunner()


@pytest.fixture(scope="module")
def page():
    driver = headless_browser.browser_or_skip()
    try:
        with running_server() as server:
            yield Page(driver, server.base_url)
    finally:
        driver.quit()


class Page:
    def __init__(self, driver, base_url: str) -> None:
        self.driver = driver
        self.base_url = base_url

    def open(self, path: str, wait: bool = True) -> None:
        self.driver.get(self.base_url + path)
        if wait:
            self.wait_done()

    def wait_done(self) -> None:
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(self.driver, WAIT_S).until(
            lambda d: d.execute_script("return document.body.dataset.state") in ("done", "error"))

    def fill(self, name: str, value: str) -> None:
        """Type ``value`` into the form field ``name`` and wait for the new result."""
        from selenium.webdriver.common.by import By

        field = self.driver.find_element(By.ID, f"f-{name}")
        self.driver.execute_script("document.body.dataset.state = 'typing'")
        field.clear()
        field.send_keys(value)
        self.wait_done()

    def set_fields(self, values: dict[str, str], run: bool = False) -> None:
        """Set form fields ``f-<name>`` at once (one change/input event each), mark the page as
        being edited, click 'run' when ``run``, and wait for the new result."""
        self.driver.execute_script(
            "for (const [id, value] of Object.entries(arguments[0])) {"
            "  const e = document.getElementById('f-' + id); e.value = value;"
            "  document.body.dataset.state = 'typing';"
            "  e.dispatchEvent(new Event(e.tagName === 'SELECT' ? 'change' : 'input')); }"
            "if (arguments[1]) document.getElementById('run').click();", values, run)
        self.wait_done()

    def metric(self, key: str) -> tuple[float, str]:
        from selenium.webdriver.common.by import By

        card = self.driver.find_element(By.CSS_SELECTOR, f'.card[data-metric="{key}"]')
        return float(card.get_attribute("data-value")), card.find_element(By.CLASS_NAME, "v").text

    def query(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(urlparse(self.driver.current_url).query).items()}

    def text(self, element_id: str) -> str:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.ID, element_id).text

    def screenshot(self, name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        assert self.driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def _cli(command: str, query: dict[str, str]) -> dict:
    result = runner.invoke(cli_app, [command, *cli_args(command, query), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_train_page(page):
    from selenium.webdriver.common.by import By

    page.open("/train?model=llama-3-8b&gpus=16&tp=2&pp=2&micro_batch_size=2&distributed_optimizer=on")
    page.fill("tp", "4")
    query = page.query()
    assert query["tp"] == "4" and query["model"] == "llama-3-8b"  # the URL holds the state
    cli = _cli("train", query)
    tokens, text = page.metric("tokens_per_s_per_gpu")
    assert tokens == cli["tokens_per_s_per_gpu"]
    assert text == f"{round(cli['tokens_per_s_per_gpu']):,}"
    assert page.metric("mfu")[0] == cli["mfu"]
    assert page.metric("peak_memory_bytes")[0] == cli["peak_memory_bytes"]
    assert page.text("cli-command").startswith("perfcast train --model llama-3-8b")
    assert json.loads(page.driver.execute_script(
        "return document.getElementById('json-output').textContent")) == cli
    link = page.driver.find_element(By.ID, "json-link").get_attribute("href")
    assert parse_qs_one(urlparse(link).query) == query  # micro_batch_size is not read as '&micro;'
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(page.driver, WAIT_S).until(  # the pipeline Gantt from the CLI's --trace
        lambda d: d.execute_script("return document.querySelectorAll('#gantt svg rect').length > 8"))
    page.screenshot("train")
    page.fill("tp", "3")  # 16 GPUs are not divisible by tp*pp = 6: the CLI's message
    assert page.driver.execute_script("return document.body.dataset.state") == "error"
    result = runner.invoke(cli_app, ["train", *cli_args("train", page.query()), "--json"])
    assert result.exit_code == 2
    assert f"error: {page.text('error')}" == result.stderr.strip()


def test_train_page_context_parallel_and_execution_options(page):
    """The options added to ``train`` in issue 18 are form fields: choosing a2a+p2p with its
    level sizes, FP8 with BF16 first/last layers, CUDA graphs and eager element-wise ops shows
    the CLI's numbers, and the URL (with '+' in 'a2a+p2p') holds them."""
    page.open("/train?model=llama-3-8b&gpus=16&tp=2&cp=4&seq_length=32768&sequence_parallel=on"
              "&precision=fp8&num_layers_at_start_in_bf16=1&num_layers_at_end_in_bf16=2"
              "&hierarchical_context_parallel_sizes=2,2")
    page.set_fields({"cp_comm_type": "a2a+p2p", "cuda_graphs": "attention",
                     "torch_compile": "off"})
    query = page.query()
    assert query["cp_comm_type"] == "a2a+p2p" and query["cuda_graphs"] == "attention"
    assert query["torch_compile"] == "off" and query["hierarchical_context_parallel_sizes"] == "2,2"
    cli = _cli("train", query)
    assert page.metric("tokens_per_s_per_gpu")[0] == cli["tokens_per_s_per_gpu"]
    assert page.metric("peak_memory_bytes")[0] == cli["peak_memory_bytes"]
    assert cli["strategy"]["hierarchical_cp_a2a_size"] == 2
    assert cli["strategy"]["cuda_graphs"] == "attention"
    page.fill("hierarchical_context_parallel_sizes", "3,2")  # A*P != cp: the CLI's message
    result = runner.invoke(cli_app, ["train", *cli_args("train", page.query()), "--json"])
    assert result.exit_code == 2
    message = page.text("e-hierarchical_context_parallel_sizes")
    assert message and f"error: {message}" == result.stderr.strip()
    page.screenshot("train_options")


def test_train_field_error_is_next_to_the_field(page):
    page.open("/train?model=llama-3-8b&gpus=8")
    page.fill("seq_length", "-4")
    message = page.text("e-seq_length")
    result = runner.invoke(cli_app, ["train", *cli_args("train", page.query()), "--json"])
    assert message and f"error: {message}" == result.stderr.strip()


def test_serve_page(page):
    page.open("/serve?model=llama-3-8b&input_len=512&output_len=64")
    page.fill("concurrency", "8")
    cli = _cli("infer", page.query())
    assert page.metric("ttft_s")[0] == cli["ttft_s"]
    assert page.metric("output_tokens_per_s_per_gpu")[0] == cli["output_tokens_per_s_per_gpu"]
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(page.driver, WAIT_S).until(
        lambda d: d.execute_script("return !!document.querySelector('#curve svg polyline')"))
    page.screenshot("serve")


def test_search_page(page):
    from selenium.webdriver.common.by import By

    page.open("/search", wait=False)  # a search runs on the button, not on every edit
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(page.driver, WAIT_S).until(lambda d: d.find_elements(By.ID, "run"))
    page.set_fields({"model": "llama-3.2-1b", "gpus": "8", "global_batch_size": "64",
                     "top": "3"}, run=True)
    cli = _cli("search", page.query())
    assert page.driver.execute_script("return document.body.dataset.progress") == (
        f"{cli['evaluated']}/{cli['evaluated']}")  # polled from /api/progress while it ran
    cells = page.driver.find_elements(By.CSS_SELECTOR, "#best td[data-value]")
    assert [float(c.get_attribute("data-value")) for c in cells] == [
        b["tokens_per_s_per_gpu"] for b in cli["best"]]
    page.screenshot("search")
    page.driver.find_elements(By.CSS_SELECTOR, "#best a.open-train")[1].click()  # the 2nd best
    WebDriverWait(page.driver, WAIT_S).until(lambda d: urlparse(d.current_url).path == "/train")
    page.wait_done()
    assert page.metric("tokens_per_s_per_gpu")[0] == cli["best"][1]["tokens_per_s_per_gpu"]


def test_deploy_page(page):
    """Deploy runs ``perfcast infer-search``; a row's 'open in Serve' forecasts that deployment
    with ``perfcast infer`` and shows the search's numbers."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    page.open("/deploy?model=llama-3-8b&gpus=16&input_len=1024&output_len=256&top=4")
    # a search runs on the button, not on every edit
    page.set_fields({"tpot_ms": "30", "disaggregated": "on"}, run=True)
    query = page.query()
    assert query["disaggregated"] == "on" and query["tpot_ms"] == "30"
    cli = _cli("infer-search", query)
    cells = page.driver.find_elements(
        By.CSS_SELECTOR, '#deployments td[data-metric="output_tokens_per_s_per_gpu"]')
    assert [float(c.get_attribute("data-value")) for c in cells] == [
        b["output_tokens_per_s_per_gpu"] for b in cli["best"]]
    modes = {g.get_attribute("data-series"): len(g.find_elements(By.TAG_NAME, "circle"))
             for g in page.driver.find_elements(By.CSS_SELECTOR, "#pareto svg g[data-series]")}
    assert modes == {mode: len(points) for mode, points in cli["pareto_by_mode"].items()}
    assert set(modes) == {"aggregated", "disaggregated"}
    page.screenshot("deploy")
    compare = page.driver.find_element(By.ID, "compare-deployments").get_attribute("href")
    aggregated = [b for b in cli["best"] if b["deployment"]["mode"] == "aggregated"]
    assert [parse_qs_one(q)["concurrency"] for q in parse_qs(urlparse(compare).query)["c"]] == [
        str(b["deployment"]["concurrency"]) for b in aggregated]
    rows = page.driver.find_elements(By.CSS_SELECTOR, "#deployments tr[data-mode=aggregated]")
    index = [b["deployment"]["mode"] for b in cli["best"]].index("aggregated")
    rows[0].find_element(By.CSS_SELECTOR, "a.open-serve").click()
    WebDriverWait(page.driver, WAIT_S).until(lambda d: urlparse(d.current_url).path == "/serve")
    page.wait_done()
    best = cli["best"][index]
    for key in ("ttft_s", "tpot_s", "output_tokens_per_s_per_gpu"):  # equal, not close
        assert page.metric(key)[0] == best[key], key


def test_compare_page(page):
    from urllib.parse import quote

    a, b = "model=llama-3-8b&gpus=16&tp=2&pp=2", "model=llama-3-8b&gpus=16&tp=4&pp=2"
    page.open(f"/compare?c={quote(a)}&c={quote(b)}")
    from selenium.webdriver.common.by import By

    rows = page.driver.find_elements(By.CSS_SELECTOR, "#compare tr")
    tokens = next(r for r in rows if r.find_elements(By.TAG_NAME, "td")
                  and r.find_elements(By.TAG_NAME, "td")[0].text == "tokens/s/GPU")
    shown = [float(c.get_attribute("data-value")) for c in tokens.find_elements(By.TAG_NAME, "td")[1:]]
    expected = [_cli("train", dict(parse_qs_one(q)))["tokens_per_s_per_gpu"] for q in (a, b)]
    assert shown == expected
    highlighted = tokens.find_elements(By.TAG_NAME, "td")[2].get_attribute("class")
    assert highlighted == ("better" if expected[1] > expected[0] else "worse")
    page.screenshot("compare")


def test_compare_serving_page(page):
    """Three Serve configurations side by side: numbers from ``perfcast infer --json``, the
    inputs that differ and the better/worse cells highlighted against A."""
    from urllib.parse import quote

    from selenium.webdriver.common.by import By

    base = "model=llama-3-8b&gpus=8&input_len=1024&output_len=256&concurrency=64"
    configs = [base + "&tp=1", base + "&tp=2", base + "&tp=2&kv_precision=fp8"]
    page.open("/compare?kind=serve&" + "&".join(f"c={quote(c)}" for c in configs))
    rows = {r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[1:]
            for r in page.driver.find_elements(By.CSS_SELECTOR, "#compare tr")
            if r.find_elements(By.TAG_NAME, "td")}
    cli = [_cli("infer", parse_qs_one(c)) for c in configs]
    for label, key in (("output tokens/s/GPU", "output_tokens_per_s_per_gpu"), ("TTFT", "ttft_s"),
                       ("TPOT", "tpot_s"), ("peak memory/GPU", "peak_memory_bytes")):
        assert [float(c.get_attribute("data-value")) for c in rows[label]] == [d[key] for d in cli]
    for i in (1, 2):  # higher throughput is better, lower TPOT is better
        up = cli[i]["output_tokens_per_s_per_gpu"] > cli[0]["output_tokens_per_s_per_gpu"]
        assert rows["output tokens/s/GPU"][i].get_attribute("class") == ("better" if up else "worse")
        faster = cli[i]["tpot_s"] < cli[0]["tpot_s"]
        assert rows["TPOT"][i].get_attribute("class") == ("better" if faster else "worse")
    assert [c.text for c in rows["input: tp"]] == ["1", "2", "2"]
    assert [c.get_attribute("class") for c in rows["input: kv_precision"]] == ["", "", "differs"]
    assert "input: model" not in rows
    page.screenshot("compare-serve")


def parse_qs_one(query: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(query).items()}


def test_a_missing_browser_fails_in_ci_and_skips_locally(monkeypatch, tmp_path):
    monkeypatch.setattr(headless_browser, "CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="no headless browser"):
        headless_browser.browser_or_skip()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        headless_browser.browser_or_skip()
