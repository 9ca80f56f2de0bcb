"""``perfcast serve``'s API returns what the CLI prints, and bad input gets the CLI's message."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from perfcast.cli.main import app as cli_app
from perfcast.web.fields import cli_args, page_fields

from web_server import running_server

runner = CliRunner()


@pytest.fixture(scope="module")
def client():
    with running_server() as server:
        yield server


def _cli(command: str, args: list[str]):
    return runner.invoke(cli_app, [command, *args, "--json"])


TRAIN = {"model": "llama-3-8b", "system": "dgx-h100", "gpus": "16", "tp": "2", "pp": "2",
         "vpp": "2", "global_batch_size": "32", "precision": "fp8", "sequence_parallel": "on",
         "framework": "megatron-core"}
CASES = [
    ("memory", {"model": "llama-3-70b", "gpus": "64", "tp": "8", "pp": "4", "recompute": "full",
                "distributed_optimizer": "on"}),
    ("train", {"model": "llama-3-8b", "gpus": "16", "tp": "2", "cp": "4", "seq_length": "32768",
               "cp_comm_type": "a2a+p2p", "hierarchical_context_parallel_sizes": "2,2",
               "precision": "fp8", "num_layers_at_start_in_bf16": "1",
               "num_layers_at_end_in_bf16": "2", "cuda_graphs": "attention",
               "torch_compile": "off", "sequence_parallel": "on"}),
    ("train", {"model": "llama-3-8b", "gpus": "8", "tp2d": "2x4", "sequence_parallel": "on",
               "framework": "analytical"}),
    ("memory", {"model": "llama-3-8b", "gpus": "8", "cpu_offload_layers": "4"}),
    ("memory", {"model": "llama-3-8b", "gpus": "8", "offload_modules": "core_attn,attn_proj"}),
    ("infer", {"model": "llama-3-8b", "concurrency": "8", "input_len": "512", "output_len": "64",
               "engine": "sglang"}),
    ("infer", {"model": "llama-3-8b", "tp": "2", "curve": "on", "kv_precision": "fp8"}),
    ("search", {"model": "llama-3.2-1b", "gpus": "8", "global_batch_size": "64", "top": "3",
                "max_tp": "2"}),
    ("search", {"model": "llama-3.2-1b", "gpus": "8", "global_batch_size": "64", "top": "3",
                "max_tp": "2", "fix": "recompute_modules=core_attn,mlp", "exclude": "pp=2 tp=2"}),
    ("infer-search", {"model": "llama-3-8b", "gpus": "16", "input_len": "1024",
                      "output_len": "256", "tpot_ms": "30", "disaggregated": "on", "top": "4"}),
    ("infer", {"model": "mixtral-8x7b", "gpus": "8", "tp": "8", "ep": "8", "attention_dp": "on",
               "concurrency": "64"}),
]


def test_train_api_is_byte_identical_to_the_cli_process(client):
    """The body is exactly what ``perfcast train ... --json`` prints in its own process."""
    response = client.get("/api/train", TRAIN)
    assert response.status == 200, response.text
    process = subprocess.run([sys.executable, "-m", "perfcast.cli.main", "train",
                              *cli_args("train", TRAIN), "--json"],
                             capture_output=True, text=True, check=True)
    assert response.text == process.stdout
    assert response.headers["x-perfcast-command"] == (
        "perfcast train --model llama-3-8b --system dgx-h100 --gpus 16 --tp 2 --pp 2 --vpp 2 "
        "--global-batch-size 32 --precision fp8 --sequence-parallel --framework megatron-core --json")


@pytest.mark.parametrize(("command", "query"), CASES, ids=lambda c: c if isinstance(c, str) else "")
def test_api_is_byte_identical_to_the_cli(client, command, query):
    response = client.get(f"/api/{command}", query)
    assert response.status == 200, response.text
    result = _cli(command, cli_args(command, query))
    assert result.exit_code == 0, result.output
    assert response.text == result.stdout
    assert response.headers["content-type"] == "application/json"


@pytest.mark.parametrize(("command", "query", "field"), [
    ("train", {"model": "llama-3-8b", "tp": "abc"}, "tp"),
    ("train", {"model": "no-such-model"}, "model"),
    ("train", {"model": "llama-3-8b", "gpus": "8_0"}, "gpus"),
    ("train", {"model": "llama-3-8b", "gpus": "8", "tp": "3"}, ""),
    ("train", {"model": "llama-3-8b", "precision": "fp7"}, "precision"),
    ("train", {"model": "llama-3-8b", "gpus": "8", "cp": "4", "cp_comm_type": "a2a+p2p",
               "hierarchical_context_parallel_sizes": "3,2"}, "hierarchical_context_parallel_sizes"),
    ("train", {"model": "llama-3-8b", "cuda_graphs": "everything"}, "cuda_graphs"),
    ("memory", {"model": "llama-3-8b", "seq_length": "-5"}, "seq_length"),
    ("infer", {"model": "llama-3-8b", "input_len": "0"}, "input_len"),
    ("infer", {"model": "llama-3-8b", "request_rate": "nan"}, "request_rate"),
    ("search", {"model": "llama-3-8b", "gpus": "0"}, "gpus"),
    ("search", {"model": "llama-3-8b", "gpus": "8", "fix": "recompute_modules=bogus"}, ""),
    ("infer-search", {"model": "llama-3-8b", "gpus": "8", "tpot_ms": "-3"}, "tpot_ms"),
    ("infer-search", {"model": "llama-3-8b", "gpus": "8", "engine": "trt"}, "engine"),
])
def test_bad_input_gets_the_cli_message_and_its_field(client, command, query, field):
    response = client.get(f"/api/{command}", query)
    assert response.status == 400, response.text
    body = response.json()
    result = _cli(command, cli_args(command, query))
    assert result.exit_code == 2
    assert f"error: {body['error']}" == result.stderr.strip()
    assert body["field"] == field
    assert "\n" not in body["error"]


def test_fields_the_page_does_not_offer_are_refused(client):
    """No output-file options (the page must not make the server write files)."""
    for query in ({"model": "llama-3-8b", "trace": "/tmp/x.json"}, {"plot": "/tmp"}):
        response = client.get("/api/train", query)
        assert response.status == 400
        assert "not a field of train" in response.json()["error"]
    assert client.get("/api/validate").status == 400
    assert client.get("/api/train", {"model": "llama-3-8b",
                                     "sequence_parallel": "maybe"}).status == 400


@pytest.mark.parametrize("value", ["", " ", "-1", "1e999", "0x10", "9" * 40, "é", "'; rm -rf /"])
def test_the_server_never_crashes(client, value):
    for name in ("gpus", "tp", "seq_length", "model", "framework"):
        response = client.get("/api/train", {"model": "llama-3-8b", name: value})
        assert response.status in (200, 400), (name, value, response.text)


def test_pages_and_fields(client):
    for page in ("/train", "/serve", "/deploy", "/search", "/compare"):
        response = client.get(page)
        assert response.status == 200
        assert "<script src=\"/static/main.js\">" in response.text
    fields = client.get("/api/fields").json()
    assert set(fields) == set(page_fields())
    names = {f["name"] for f in fields["train"]}
    assert {"model", "system", "gpus", "tp", "pp", "precision", "framework"} <= names
    assert client.get("/static/charts.js").status == 200


TRAIN_OPTIONS_OFFERED = ("tp2d", "cp_comm_type", "hierarchical_cp_sizes", "no_torch_compile",
                         "num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16",
                         "cuda_graphs", "cpu_offload_layers", "offload_modules")
"""Shared run options (``cli.options``) the train and memory pages must offer (issue 18)."""


def test_train_pages_offer_the_new_run_options():
    """Each option is a field of the train and memory pages whose flag is one of the CLI
    option's own flags (or, for a ``--x/--no-x`` switch, both of them)."""
    from perfcast.cli.options import _OPTIONS

    declared = {name: option.param_decls for name, _, option in _OPTIONS}
    for command in ("train", "memory"):
        flags = {flag: field for field in page_fields()[command]
                 for flag in (field.flag, field.off_flag) if flag}
        for name in TRAIN_OPTIONS_OFFERED:
            decls = [part for decl in declared[name] for part in decl.split("/")]
            offered = [d for d in decls if d in flags]
            assert offered, (command, name, decls)
            field = flags[offered[0]]
            if field.kind == "switch":
                assert {field.flag, field.off_flag} <= set(decls), (name, field)


def test_pages_load_nothing_from_the_internet():
    from perfcast.web.app import STATIC_DIR

    for path in STATIC_DIR.iterdir():
        text = path.read_text()
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", ""), path.name
        assert "https://" not in text, path.name
        assert "//cdn" not in text, path.name


def test_help_does_not_import_the_web_framework():
    code = ("import sys; from perfcast.cli.main import app; from typer.testing import CliRunner; "
            "CliRunner().invoke(app, ['--help']); "
            "print([m for m in ('starlette', 'uvicorn', 'perfcast.web') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_train_trace_is_the_cli_trace_file(client, tmp_path):
    """The Train page's Gantt reads the Chrome trace ``perfcast train --trace`` writes."""
    query = {"model": "llama-3-8b", "gpus": "8", "pp": "4", "vpp": "2"}
    response = client.get("/api/trace/train", query)
    assert response.status == 200, response.text
    path = tmp_path / "trace.json"
    result = runner.invoke(cli_app, ["train", *cli_args("train", query), "--trace", str(path),
                                     "--json"])
    assert result.exit_code == 0, result.output
    assert response.text == path.read_text()
    assert response.headers["x-perfcast-command"].endswith("--trace trace.json --json")
    bad = client.get("/api/trace/train", {"model": "llama-3-8b", "gpus": "8", "pp": "x"})
    assert bad.status == 400 and bad.json()["field"] == "pp"


def test_concurrent_requests_get_their_own_output(client):
    """Each request's output is caught in its own thread: side-by-side forecasts do not mix."""
    from concurrent.futures import ThreadPoolExecutor

    queries = [{"model": "llama-3-8b", "gpus": "16", "tp": str(tp), "pp": str(pp)}
               for tp in (1, 2, 4) for pp in (1, 2)]
    with ThreadPoolExecutor(max_workers=len(queries)) as pool:
        replies = list(pool.map(lambda q: client.get("/api/train", q), queries))
    for query, reply in zip(queries, replies, strict=True):
        assert reply.status == 200, reply.text
        assert reply.text == _cli("train", cli_args("train", query)).stdout


def test_serving_compare_requests_get_the_cli_bodies(client):
    """Compare (kind=serve) asks /api/infer for 2-4 Serve configurations at once: each reply is
    that configuration's ``perfcast infer --json``, and differing inputs give differing bodies."""
    from concurrent.futures import ThreadPoolExecutor

    base = {"model": "llama-3-8b", "gpus": "8", "input_len": "1024", "output_len": "256",
            "concurrency": "64"}
    queries = [{**base, "tp": "1"}, {**base, "tp": "2"}, {**base, "tp": "2", "kv_precision": "fp8"},
               {**base, "tp": "8", "engine": "sglang"}]
    with ThreadPoolExecutor(max_workers=len(queries)) as pool:
        replies = list(pool.map(lambda q: client.get("/api/infer", q), queries))
    bodies = [reply.text for reply in replies]
    for query, reply in zip(queries, replies, strict=True):
        assert reply.status == 200, reply.text
        assert reply.text == _cli("infer", cli_args("infer", query)).stdout
    assert len(set(bodies)) == len(bodies)
    assert client.get("/compare", {"kind": "serve"}).status == 200


def test_search_progress_is_polled_by_token(client):
    """A search run with ``X-Perfcast-Progress: <token>`` reports done/total strategies to
    ``/api/progress/<token>``; the body stays the CLI's."""
    from concurrent.futures import ThreadPoolExecutor

    query = {"model": "llama-3-8b", "gpus": "32", "global_batch_size": "256", "top": "2"}
    token = "test-progress-0123"
    assert client.get(f"/api/progress/{token}").status == 404
    polled = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(client.get, "/api/search", query, {"X-Perfcast-Progress": token})
        while not future.done():
            reply = client.get(f"/api/progress/{token}")
            if reply.status == 200:
                polled.append(reply.json())
            # a pause between polls: polling without one held the GIL of this process (the
            # server runs the search in a thread of it) and made the search ~several times slower
            time.sleep(0.05)
        response = future.result()
    assert response.status == 200, response.text
    assert response.text == _cli("search", cli_args("search", query)).stdout
    evaluated = response.json()["evaluated"]
    final = client.get(f"/api/progress/{token}").json()
    assert final == {"done": evaluated, "total": evaluated}
    assert all(p["total"] == evaluated and 0 <= p["done"] <= evaluated for p in polled)
    assert [p["done"] for p in polled] == sorted(p["done"] for p in polled)
    assert any(0 < p["done"] < evaluated for p in polled)  # seen while it ran
    small = {"model": "llama-3.2-1b", "gpus": "2", "global_batch_size": "8", "top": "1"}
    client.get("/api/search", small, {"X-Perfcast-Progress": "../x"})  # not a token: not kept
    assert client.get("/api/progress/..%2Fx").status == 404


def test_repeatable_search_pins_become_one_option_each():
    """The search page's ``fix`` / ``exclude`` fields: one ``--fix`` / ``--exclude`` per
    whitespace-separated KEY=VALUE, recompute module sets kept whole."""
    args = cli_args("search", {"model": "llama-3-8b", "fix": " recompute_modules=core_attn,mlp  tp=2",
                               "exclude": "pp=4"})
    assert args[-6:] == ["--fix", "recompute_modules=core_attn,mlp", "--fix", "tp=2",
                         "--exclude", "pp=4"]
    assert "--fix" not in cli_args("search", {"model": "llama-3-8b", "fix": "  "})
