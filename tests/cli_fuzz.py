"""Random ``perfcast`` invocations and the contract every one must keep (shared by
tests/test_cli_fuzz.py, a small hypothesis run in CI, and benchmarks/cli_fuzz.py, >= 5,000).

Contract: exit 0 or 2; no traceback (no exception other than SystemExit escapes the command);
exit 2 prints exactly one line, ``error: ...``, on stderr; every invocation ends within its time
limit; JSON output holds no NaN, no infinity and no negative number (except the keys in
``SIGNED_KEYS``, which are differences by definition).
"""

from __future__ import annotations

import json
import math
import signal
import time
from dataclasses import dataclass

from hypothesis import strategies as st

SIGNED_KEYS = ("headroom", "margin", "delta", "error", "residual", "slack")
"""JSON keys whose values may be negative (a memory headroom below zero means 'does not fit')."""


class InvocationTimeout(BaseException):
    """Raised by the alarm inside a command that runs past its limit (a BaseException, so the
    CLI's and click's ``except Exception`` do not swallow it)."""


@dataclass(frozen=True)
class Outcome:
    argv: tuple[str, ...]
    exit_code: int | None
    stdout: str
    stderr: str
    elapsed_s: float
    problem: str | None
    """None when the contract held; else what broke (first broken rule)."""


def _alarm(signum, frame):
    raise InvocationTimeout()


WALL_BACKSTOP = 6.0
"""With ``clock="cpu"``, a run is also stopped after this many times ``limit_s`` of wall time
(a hang that sleeps, or waits on forked workers, uses no CPU of this process)."""


def invoke(argv: list[str], limit_s: float = 10.0, clock: str = "cpu") -> Outcome:
    """Run ``perfcast argv`` in-process, bounded by ``limit_s`` and judge it.

    ``clock="wall"`` bounds elapsed time (SIGALRM): the figure the benchmark reports.
    ``clock="cpu"`` bounds this process's CPU time (SIGPROF), which does not grow when other
    processes load the machine, with a wall backstop of ``WALL_BACKSTOP`` x ``limit_s``: the
    test suite's guard against hangs on a shared machine."""
    from typer.testing import CliRunner

    from perfcast.cli.main import app

    runner = CliRunner()
    timers = [(signal.SIGALRM, signal.ITIMER_REAL,
               limit_s if clock == "wall" else WALL_BACKSTOP * limit_s)]
    if clock == "cpu":
        timers.append((signal.SIGPROF, signal.ITIMER_PROF, limit_s))
    previous = [(sig, signal.signal(sig, _alarm)) for sig, _, _ in timers]
    for _, timer, seconds in timers:
        signal.setitimer(timer, seconds)
    start = time.perf_counter()
    try:
        result = runner.invoke(app, argv, catch_exceptions=True)
    except InvocationTimeout:
        elapsed = time.perf_counter() - start
        return Outcome(tuple(argv), None, "", "", elapsed,
                       f"over {limit_s:g} s ({clock}; {elapsed:.1f} s wall)")
    finally:
        for _, timer, _ in timers:
            signal.setitimer(timer, 0)
        for sig, handler in previous:
            signal.signal(sig, handler)
    elapsed = time.perf_counter() - start
    stdout, stderr = result.stdout, result.stderr
    return Outcome(tuple(argv), result.exit_code, stdout, stderr, elapsed,
                   _problem(argv, result, stdout, stderr))


def _problem(argv, result, stdout: str, stderr: str) -> str | None:
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        frame = exc.__traceback__
        while frame is not None and frame.tb_next is not None:
            frame = frame.tb_next
        where = (f"{frame.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.tb_lineno}"
                 if frame is not None else "?")
        return f"traceback {type(exc).__name__} at {where}: {str(exc)[:120]}"
    if result.exit_code not in (0, 2):
        return f"exit code {result.exit_code}"
    if result.exit_code == 2:
        lines = stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("error: "):
            return f"error output is not one 'error:' line: {stderr[:200]!r}"
        return None
    if "--json" in argv and "--help" not in argv:
        return _json_problem(stdout)
    return None


def _json_problem(stdout: str) -> str | None:
    try:
        data = json.loads(stdout, parse_constant=lambda name: float(name.lower()
                                                                    .replace("infinity", "inf")))
    except ValueError as exc:
        return f"JSON does not parse: {exc}"
    for path, value in _numbers(data, ""):
        if math.isnan(value) or math.isinf(value):
            return f"{path}={value} in JSON"
        if value < 0 and not any(key in path for key in SIGNED_KEYS):
            return f"negative {path}={value} in JSON"
    return None


def _numbers(data, path: str):
    if isinstance(data, bool):
        return
    if isinstance(data, int | float):
        yield path, float(data)
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _numbers(value, f"{path}.{key}")
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _numbers(value, f"{path}[{i}]")


# --- random command lines -------------------------------------------------------------------

_INTS = st.one_of(
    st.sampled_from(["1", "2", "4", "8", "16", "32", "64"]),
    st.sampled_from(["0", "-1", "3", "7", "1000", "2147483648", "9223372036854775807",
                     "99999999999999999999999", "8_0", "abc", "", "1e3", "0x10", " 8"]),
)
_FLOATS = st.one_of(
    st.sampled_from(["0.5", "1", "1.2", "2", "0.01", "100"]),
    st.sampled_from(["0", "-1", "-0.0", "inf", "-inf", "nan", "1e308", "1e999", "abc", "",
                     "1_0"]),
)
_MODELS = st.sampled_from(["llama3-8b", "llama3-8b", "mixtral-8x7b", "gpt3-175b", "nosuchmodel",
                           "/nonexistent/config.json", "", "x" * 300, "/dev/null", "{tmp}",
                           "{tmp}/binary.json", "{tmp}/ab.csv", "{tmp}/partial.json",
                           "{tmp}/bad.yaml"])
_SYSTEMS = st.sampled_from(["dgx-h100", "dgx-h100", "dgx-a100", "dgx-b200", "nosuch", "",
                            "gaudi3", "tpu-v5p", "mi250x", "{tmp}/sys.yaml", "{tmp}/gpu.yaml",
                            "{tmp}/badsys.yaml", "{tmp}/bad.yaml", "/nonexistent/s.yaml"])
_GPUS = st.sampled_from(["h100-sxm", "mi300x", "gaudi3", "{tmp}/gpu.yaml", "{tmp}/badgpu.yaml",
                         "{tmp}/sys.yaml", "nosuch", ""])


def _pairs(options: dict[str, st.SearchStrategy]) -> st.SearchStrategy[list[str]]:
    """A random subset of ``options``, each with a random value, as argv tokens."""
    names = sorted(options)
    return st.lists(st.sampled_from(names), max_size=5, unique=True).flatmap(
        lambda chosen: st.tuples(*[options[n] for n in chosen]).map(
            lambda values: [t for n, v in zip(chosen, values, strict=True)
                            for t in ((n,) if v is None else (n, v))]))


_FLAG = st.none()


def fuzz_folder() -> str:
    """A scratch folder with the files the fuzzer points commands at (made once per process)."""
    import os
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.gettempdir()) / f"perfcast-fuzz-{os.getpid()}"
    if not folder.exists():
        folder.mkdir()
        (folder / "ab.csv").write_text("a,b\n1,2\n")
        (folder / "empty.csv").write_text("")
        (folder / "header.csv").write_text("model,gpu_type,num_gpus,tp,pp,seq_len,precision,mfu\n")
        (folder / "binary.csv").write_bytes(bytes(range(256)))
        (folder / "binary.json").write_bytes(bytes(range(255, 0, -1)))
        (folder / "partial.json").write_text('{"hidden_size": 4096, "num_hidden_layers": 2}')
        (folder / "bad.yaml").write_text("hidden_size: [1")
        from perfcast.cli.hardware_cmd import template_text

        (folder / "gpu.yaml").write_text(template_text("gpu"))
        (folder / "sys.yaml").write_text(template_text("system"))
        (folder / "badgpu.yaml").write_text(template_text("gpu").replace("hbm_TBps: 3.35",
                                                                         "hbm_TBps: -1"))
        (folder / "badsys.yaml").write_text(template_text("system").replace(
            "scale_up_domain_gpus: 8", "scale_up_domain_gpus: 0"))
        shared = Path(__file__).resolve().parents[2] / "shared" / "ground_truth" / "training.csv"
        lines = shared.read_text(encoding="utf-8").splitlines()[:4] if shared.exists() else []
        (folder / "rows.csv").write_text("\n".join(lines) + "\n")
    return str(folder)


_OUT_FILES = st.sampled_from(["/nonexistent/x.json", "/dev/full", "{tmp}", "{tmp}/t.json",
                              "{tmp}/" + "y" * 300 + ".json"])
_PLOT_DIRS = st.sampled_from(["/nonexistent/deep/plots", "c.txt", "/dev/null", "{tmp}/ab.csv"])
_DATA = st.sampled_from(["/nonexistent.csv", "/dev/null", "{tmp}", "{tmp}/ab.csv",
                         "{tmp}/empty.csv", "{tmp}/header.csv", "{tmp}/binary.csv",
                         "{tmp}/rows.csv"])
_RUN = {
    "--gpus": _INTS, "--tp": _INTS, "--pp": _INTS, "--vpp": _INTS, "--cp": _INTS, "--ep": _INTS,
    "--mbs": _INTS, "--gbs": _INTS, "--seq-length": _INTS, "--system": _SYSTEMS,
    "--recompute": st.sampled_from(["none", "selective", "full", "bogus"]),
    "--recompute-num-layers": _INTS, "--moe-load-imbalance": _FLOATS,
    "--moe-expert-capacity-factor": _FLOATS, "--gpu-clock-mhz": _FLOATS,
    "--zero-stage": _INTS, "--fsdp": _FLAG, "--sequence-parallel": _FLAG,
    "--precision": st.sampled_from(["bf16", "fp8", "fp4"]),
    "--fp8-recipe": st.sampled_from(["tensorwise", "mxfp8", "nvfp4"]),
    "--make-vocab-size-divisible-by": _INTS, "--mtp-num-layers": _INTS, "--gpu": _GPUS,
}
_TRAIN = {**_RUN, "--pipeline-schedule": st.sampled_from(
    ["auto", "1f1b", "interleaved", "gpipe", "zb-h1", "zb-v", "dualpipe", "bad"]),
    "--trace": _OUT_FILES, "--plot": _PLOT_DIRS, "--report": _OUT_FILES.filter(
        lambda p: p != "{tmp}/t.json"), "--train-tokens": _FLOATS,
    "--price-per-gpu-hour": _FLOATS}
"""--plot and --report only with paths that must be refused (rendering figures is slow)."""
_INFER = {
    "--gpus": _INTS, "--tp": _INTS, "--pp": _INTS, "--ep": _INTS, "--system": _SYSTEMS,
    "--batch-size": _INTS, "--input-len": _INTS, "--output-len": _INTS,
    "--precision": st.sampled_from(["bf16", "fp8", "fp4", "int4"]),
    "--weight-precision": st.sampled_from(["int8", "int4", "fp8"]),
    "--kv-precision": st.sampled_from(["fp8", "bf16"]),
    "--batching": st.sampled_from(["static", "continuous"]), "--prefill-chunk": _INTS,
    "--offload-weights": _FLOATS, "--offload-kv": _FLOATS, "--acceptance-rate": _FLOATS,
    "--num-draft-tokens": _INTS, "--cuda-graphs": _FLAG, "--gpu": _GPUS,
}
_GEMM = {"--m": _INTS, "--n": _INTS, "--k": _INTS, "--batch": _INTS, "--system": _SYSTEMS,
         "--dtype": st.sampled_from(["bf16", "fp8", "fp4", "int8", "fp64"]),
         "--gpu-clock-mhz": _FLOATS, "--gpu": _GPUS}
_ATTENTION = {"--batch": _INTS, "--heads": _INTS, "--kv-heads": _INTS, "--seq-q": _INTS,
              "--seq-kv": _INTS, "--head-dim": _INTS, "--head-dim-v": _INTS,
              "--system": _SYSTEMS, "--backward": _FLAG, "--full": _FLAG,
              "--dtype": st.sampled_from(["bf16", "fp8"]), "--gpu": _GPUS}
_SCHEDULE = {"--weight-grad-fraction": _FLOATS, "--virtual-stages": _INTS, "--p2p-time": _FLOATS}
_SEARCH = {"--tp": _INTS, "--pp": _INTS, "--top": _INTS, "--gbs": _INTS, "--seq-length": _INTS,
           "--objective": st.sampled_from(["throughput", "time", "cost"]),
           "--token-budget": _FLOATS, "--price-per-gpu-hour": _FLOATS,
           "--max-micro-batch-size": _INTS, "--max-pp": _INTS, "--system": _SYSTEMS,
           "--no-fp8": _FLAG}
_COMM = {"--stride": _INTS, "--system": _SYSTEMS, "--gpu": _GPUS,
         "--algorithm": st.sampled_from(["ring", "tree", "bogus"])}
_SMALL_GPUS = st.sampled_from(["1", "8", "16", "0", "-8", "3", "2147483648", "abc", "8_0"])
_INFER_SEARCH = {"--system": _SYSTEMS, "--input-len": _INTS, "--output-len": _INTS,
                 "--ttft-ms": _FLOATS, "--tpot-ms": _FLOATS,
                 "--min-tokens-per-s-per-user": _FLOATS, "--top": _INTS,
                 "--engine": st.sampled_from(["vllm", "sglang", "trtllm", "tgi"]),
                 "--disaggregated": _FLAG, "--no-disaggregated": _FLAG, "--plot": _PLOT_DIRS}


@st.composite
def command_lines(draw) -> list[str]:
    """One random ``perfcast`` argv (mostly plausible, often wrong)."""
    kind = draw(st.sampled_from(["train", "memory", "infer", "gemm", "attention", "schedule",
                                 "search", "sweep", "comm", "catalog", "validate", "usage",
                                 "infer-search"]))
    json_flag = ["--json"] if draw(st.booleans()) or kind in ("search", "sweep") else []
    if kind in ("train", "memory"):
        argv = [kind, "-m", draw(_MODELS), *draw(_pairs(_TRAIN if kind == "train" else _RUN))]
    elif kind == "infer":
        argv = ["infer", "-m", draw(_MODELS), *draw(_pairs(_INFER))]
    elif kind == "gemm":
        dims = [t for d in ("--m", "--n", "--k") for t in (d, draw(_INTS))]
        argv = ["kernels", "gemm", *dims, *draw(_pairs(_GEMM))]
    elif kind == "attention":
        argv = ["kernels", "attention", *draw(_pairs(_ATTENTION))]
    elif kind == "schedule":
        argv = ["schedule", "--schedule", draw(st.sampled_from(
                    ["1f1b", "gpipe", "interleaved", "zb-h1", "zb-v", "dualpipe"])),
                "--stages", draw(_INTS), "--micro-batches", draw(_INTS),
                "--forward-time", draw(_FLOATS), "--backward-time", draw(_FLOATS),
                *draw(_pairs(_SCHEDULE))]
    elif kind == "search":
        argv = ["search", "-m", draw(_MODELS), "--gpus", draw(_SMALL_GPUS),
                *draw(_pairs(_SEARCH))]
    elif kind == "infer-search":
        argv = ["infer-search", "-m", draw(_MODELS), "--gpus", draw(_SMALL_GPUS),
                *draw(_pairs(_INFER_SEARCH))]
    elif kind == "sweep":
        gpus = draw(st.sampled_from(["8", "8,8", "", ",", "8,16", "0", "-8", "abc",
                                     "2147483648"]))
        vary = draw(st.sampled_from([[], ["--vary", "peak_flops=0.5,2"], ["--vary", "peak_flops=-1"],
                                     ["--vary", "bogus=2"], ["--vary", "hbm_bandwidth=inf"],
                                     ["--vary", "peak_flops="]]))
        if "," in gpus:  # a valid multi-point sweep is a batch job, not a 10 s command
            vary = []
        argv = ["sweep", "-m", draw(_MODELS), "--gpus", gpus, *vary]
    elif kind == "comm":
        argv = ["comm", draw(st.sampled_from(["all-reduce", "all-gather", "all-to-all", "bogus"])),
                "--size-bytes", draw(_FLOATS), "--gpus", draw(_INTS), *draw(_pairs(_COMM))]
    elif kind == "catalog":
        argv = [draw(st.sampled_from(["models", "systems"])),
                *draw(st.sampled_from([[], ["llama3-8b"], ["dgx-h100"], ["h100-sxm"], ["nosuch"],
                                       ["mixtral-8x7b"], ["gaudi3"]]))]
        argv = draw(st.sampled_from([argv, ["catalog", "template", "gpu"],
                                     ["catalog", "template", "bogus"],
                                     ["catalog", "check", "{tmp}/sys.yaml"],
                                     ["catalog", "check", "{tmp}/badgpu.yaml"],
                                     ["catalog", "check", "{tmp}/ab.csv"], ["catalog"]]))
    elif kind == "validate":
        argv = ["validate", "--data", draw(_DATA)]
    else:
        argv = draw(st.sampled_from([["train"], ["nosuchcommand"], ["train", "--bogus"],
                                     ["train", "-m"], ["kernels"], ["kernels", "gemm"],
                                     ["--version"], ["train", "--help"],
                                     ["train", "-m", "llama3-8b", "--sequence-parallel", "true"]]))
    tmp = fuzz_folder()
    return [a.replace("{tmp}", tmp) for a in argv] + json_flag
