"""DESIGN.md layers: a lower layer never imports a higher one (issue 22 item 10: ``graph``
imported ``kernels`` for FLOP and fused-chain byte counts; those now live in
``perfcast.op_counts``, below both). Checked on the import statements of every module,
including imports inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "perfcast"
LAYERS = ("specs", "catalog", "graph", "kernels", "comm", "schedule", "estimate", "search",
          "validate", "report", "cli")
"""Lowest first, as DESIGN.md lists them top to bottom."""


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def test_no_layer_imports_a_higher_one() -> None:
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = []
    for path in sorted(SRC.rglob("*.py")):
        layer = path.relative_to(SRC).parts[0]
        if layer not in rank:
            continue
        for module in _imports(path):
            parts = module.split(".")
            if parts[0] == "perfcast" and len(parts) > 1 and rank.get(parts[1], -1) > rank[layer]:
                upward.append(f"{path.relative_to(SRC)} imports {module}")
    assert upward == []


def test_graph_counts_come_from_op_counts() -> None:
    graph = " ".join(p.read_text() for p in (SRC / "graph").glob("*.py"))
    assert "perfcast.kernels" not in graph and "perfcast.op_counts" in graph
