"""Draft the JSON Schemas in ``schemas/`` from real ``--json`` outputs of README-style commands.

    python tools/gen_json_schemas.py            # writes schemas/<command>.schema.json

Each schema is inferred from one or more sample outputs (Draft 2020-12): a key is ``required``
when every sample has it, its type is the union of the JSON types seen (``integer`` within
``number``; ``null`` only where a sample had null; a key null in every sample is left
untyped), arrays get one merged ``items`` schema, and
the objects named in ``MAP_KEYS`` (keyed by source, metric, generation, parameter) get an
``additionalProperties`` value schema instead of fixed keys. Then the tightening rules below
apply, the same for every command, so the key vocabulary reads one way everywhere:

- keys ending in a unit suffix (``_s``, ``_bytes``, ``_GB``, ``_Bps``, ``_GBps``, ``flops``) and
  counts are ``minimum: 0``, except the signed ones in ``SIGNED_KEYS``;
- ``mfu`` and ``hfu`` are fractions in [0, 1]; ``fraction_of_peak`` and ``bubble_fraction``
  are >= 0;
- ``additionalProperties`` stays open (outputs gain keys; tests and users read known ones).

Run it when an output changes shape, review the diff, and keep hand edits small.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from typer.testing import CliRunner

from perfcast.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"

SAMPLES: dict[str, tuple[str, list[str]]] = {
    "train": ("perfcast train --json", [
        "train --model llama3-8b --system dgx-h100 --gpus 8 --fsdp --seq-length 8192 "
        "--global-batch-size 16 --json",
        "train --model llama3-70b --system dgx-h100 --gpus 64 --tp 8 --pp 2 --sequence-parallel "
        "--recompute selective --seq-length 8192 --global-batch-size 128 --fp8 --json"]),
    "memory": ("perfcast memory --json", [
        "memory --model mixtral-8x7b --system dgx-h100 --gpus 64 --tp 2 --ep 8 "
        "--seq-length 4096 --json",
        "memory --model llama3-8b --system dgx-h100 --gpus 8 --fsdp --json"]),
    "infer": ("perfcast infer --json (static or continuous batch)", [
        "infer --model llama-2-7b --system dgx-a100 --weight-precision int4 --input-len 5 "
        "--output-len 200 --json",
        "infer --model mixtral-8x7b --system dgx-h100 --tp 2 --batching continuous "
        "--batch-size 128 --json"]),
    "infer-serving": ("perfcast infer --concurrency/--request-rate --json (engine simulation)", [
        "infer --model llama-3.1-8b --system dgx-h100 --concurrency 16 --input-len 1024 "
        "--output-len 256 --json",
        "infer --model llama-3.1-8b --system dgx-h100 --request-rate 8 --num-requests 50 "
        "--engine vllm --engine-version 0.21.0 --json"]),
    "search": ("perfcast search --json", [
        "search --model llama3-8b --gpus 16 --global-batch-size 32 --tp 2 --max-pp 2 --json"]),
    "sweep": ("perfcast sweep --json", [
        "sweep --model llama-3.2-1b --gpus 8,16 --systems dgx-h100 --global-batch-size 32 "
        "--seq-length 2048 --max-cp 1 --json"]),
    "validate": ("perfcast validate --json", [
        f"validate --data {SHARED}/ground_truth/inference.csv --json",
        f"validate --data {SHARED}/ground_truth/training.csv --json"]),
    "calibrate": ("perfcast calibrate --json", [
        f"calibrate --data {SHARED}/ground_truth/training.csv --out /tmp/perfcast-schema-cal "
        "--json"]),
    "comm": ("perfcast comm --json", [
        "comm all-reduce --size-bytes 1073741824 --gpus 8 --system dgx-h200 --json",
        "comm all-to-all --size-bytes 100000000 --gpus 64 --system dgx-h100 --json"]),
    "kernels-gemm": ("perfcast kernels gemm --json", [
        "kernels gemm --m 16 --n 8192 --k 8192 --json",
        f"kernels gemm --m 4096 --n 1536 --k 5120 --pass forward --system dgx-b200 "
        f"--kernel-backend measured --kernel-table "
        f"{SHARED}/reference/measured_kernels/simumax_kernels.csv --json"]),
    "kernels-attention": ("perfcast kernels attention --json", [
        "kernels attention --batch 2 --heads 32 --kv-heads 8 --seq-q 8192 --head-dim 128 "
        "--backward --system dgx-h100 --json"]),
    "schedule": ("perfcast schedule --json", [
        "schedule --schedule 1f1b --stages 4 --micro-batches 8 --forward-time 1 "
        "--backward-time 2 --json"]),
    "models": ("perfcast models --json", ["models --json"]),
    "systems": ("perfcast systems --json", ["systems --json"]),
}

MAP_KEYS = {"by_source", "by_scale", "by_metric", "by_generation", "by_feature",
            "rows_by_generation", "parameters", "cv_by_source", "cv_ranges"}
"""Objects whose keys are data (source ids, metrics, generations, fitted parameter names)."""
SIGNED_KEYS = {"memory_headroom_bytes", "kv_pool_GB", "kv_pool_bytes", "error", "low", "high",
               "value", "factor"}
"""Numbers that may be negative: headroom and KV pool when the weights do not fit, signed
errors, fit bounds."""
UNIT_SUFFIXES = ("_s", "_bytes", "_GB", "_GiB", "_Bps", "_GBps", "flops", "_per_gpu", "tflops")
FRACTIONS = {"mfu", "hfu", "within_10pct", "within_20pct", "cv_within_10", "cv_within_20"}
NON_NEGATIVE = {"mape", "median_abs_error", "cv_mape", "cv_median", "fraction_of_peak",
                "bubble_fraction", "bubble_over_ideal", "pct_of_peak", "standard_error"}
ENUMS = {"bound": ["compute", "memory", "launch"]}
"""String keys with a closed set of values."""


def _type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def infer(values: list, key: str = "") -> dict:
    """Schema of every value in ``values`` (all observed at the same place)."""
    types = {_type(v) for v in values}
    if "integer" in types and "number" in types:
        types.discard("integer")
    if types == {"null"}:
        return {"description": "null in every sample: its type is not pinned here"}
    schema: dict = {"type": sorted(types)[0] if len(types) == 1 else sorted(types)}
    objects = [v for v in values if isinstance(v, dict)]
    if objects and key in MAP_KEYS:
        schema["additionalProperties"] = infer([x for o in objects for x in o.values()])
    elif objects:
        keys = list(dict.fromkeys(k for o in objects for k in o))
        schema["properties"] = {k: infer([o[k] for o in objects if k in o], k) for k in keys}
        schema["required"] = [k for k in keys if all(k in o for o in objects)]
    arrays = [v for v in values if isinstance(v, list)]
    items = [x for a in arrays for x in a]
    if items:
        schema["items"] = infer(items)
    numeric = types & {"integer", "number"}
    if numeric and key not in SIGNED_KEYS and (key.endswith(UNIT_SUFFIXES) or key in FRACTIONS
                                               or key in NON_NEGATIVE
                                               or key.startswith(("num_", "max_"))
                                               or types == {"integer"}):
        schema["minimum"] = 0
    if numeric and key in FRACTIONS:
        schema["maximum"] = 1
    if types == {"string"} and ENUMS.get(key):
        schema["enum"] = ENUMS[key]
    return schema


def tighten(name: str, schema: dict) -> dict:
    """Hand rules beyond inference: the search's Pareto entries are candidates like ``best``;
    calibrate's standard errors and CV ranges are None where the fit has no curvature at a
    bound (``ParameterEstimate.standard_error: float | None``), and its ``inference`` block is
    an object when the data holds inference rows."""
    if name == "calibrate":
        training = schema["properties"]["training"]["properties"]
        training["parameters"]["additionalProperties"]["properties"]["standard_error"]["type"] = \
            ["null", "number"]
        training["cv_ranges"]["additionalProperties"]["type"] = ["array", "null"]
        schema["properties"]["inference"]["type"] = ["null", "object"]
    if name == "search":
        schema["$defs"] = {"candidate": schema["properties"]["best"]["items"]}
        for key in ("best", "pareto"):
            schema["properties"][key]["items"] = {"$ref": "#/$defs/candidate"}
    return schema


def sample(command: str) -> object:
    result = CliRunner().invoke(app, shlex.split(command))
    if result.exit_code != 0:
        raise SystemExit(f"{command!r} exited {result.exit_code}: {result.output[-400:]}")
    return json.loads(result.stdout)


def main() -> None:
    out_dir = ROOT / "schemas"
    out_dir.mkdir(exist_ok=True)
    only = set(sys.argv[1:])
    for name, (title, commands) in SAMPLES.items():
        if only and name not in only:
            continue
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
                  "$id": f"https://perfcast.dev/schemas/{name}.schema.json",
                  "title": title, **infer([sample(c) for c in commands])}
        schema = tighten(name, schema)
        path = out_dir / f"{name}.schema.json"
        path.write_text(json.dumps(schema, indent=2) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
