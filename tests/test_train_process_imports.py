"""``perfcast train`` as a process loads only what a training forecast needs (issue 18).

The start-up cuts each have a test here: no module of another concern is imported (scipy,
pandas, plotting, rich in ``--json`` mode, YAML once the parse cache is warm), pydantic looks for
no plugins (``cli.pydantic_plugins``), typer builds no validator for an unset option nor for one
left at a plain default (``cli.typer_defaults``), and no perfcast model makes pydantic parse a
builtin's signature.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import pytest
import typer
import typer.core
from pydantic import BaseModel
from typer.testing import CliRunner

from perfcast.cli import typer_defaults
from perfcast.cli.pydantic_plugins import PLUGINS_VARIABLE, skip_pydantic_plugins

NOT_FOR_TRAIN = ("scipy", "pandas", "matplotlib", "dask", "torch", "rich", "yaml", "jsonschema",
                 "starlette", "uvicorn", "pyarrow")
"""Top-level packages a ``perfcast train --json`` process must not import."""

_CHILD = """
import json, sys
sys.argv = ['perfcast', 'train', '-m', 'llama-3-8b', '-g', '8', '--json']
import perfcast.cli.main as m
try:
    m.run()
except SystemExit:
    pass
import pydantic.plugin._loader as plugins
print(json.dumps({
    "top_level": sorted({name.split('.')[0] for name in sys.modules}),
    "plugins_discovered": plugins._plugins is not None,
}), file=sys.stderr)
"""


def _train_process(cache_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PERFCAST_NO_CACHE", PLUGINS_VARIABLE)}
    env["PERFCAST_CACHE_DIR"] = str(cache_dir)
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                          check=True, env=env)
    assert '"tokens_per_s_per_gpu"' in done.stdout
    return json.loads(done.stderr.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def warm_process(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What a second ``perfcast train --json`` process imports (the first filled the cache)."""
    cache = tmp_path_factory.mktemp("yaml-cache")
    _train_process(cache)
    return _train_process(cache)


def test_train_imports_no_module_it_does_not_use(warm_process: dict) -> None:
    imported = set(warm_process["top_level"])
    assert {"numpy", "pydantic", "typer"} <= imported  # the check sees the process's modules
    assert sorted(imported & set(NOT_FOR_TRAIN)) == []


def test_train_looks_for_no_pydantic_plugin(warm_process: dict) -> None:
    assert warm_process["plugins_discovered"] is False


def test_plugins_are_skipped_when_nothing_is_set() -> None:
    env: dict[str, str] = {"PATH": "/bin"}
    assert skip_pydantic_plugins(env) is True
    assert env[PLUGINS_VARIABLE] == "__all__"


@pytest.mark.parametrize("value", ["", "logfire", "__all__"])
def test_a_user_choice_of_plugins_is_kept(value: str) -> None:
    env = {PLUGINS_VARIABLE: value}
    assert skip_pydantic_plugins(env) is False
    assert env == {PLUGINS_VARIABLE: value}


class _Colour(str, Enum):
    red = "red"
    blue = "blue"


def _shout(value: str | None) -> str | None:
    return None if value is None else value.upper()


def _app(seen: dict) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def main(
        need: Annotated[int, typer.Option("--need")],
        colour: Annotated[_Colour | None, typer.Option("--colour")] = None,
        count: Annotated[int | None, typer.Option("--count", min=1)] = None,
        tags: Annotated[list[str] | None, typer.Option("--tag")] = None,
        loud: Annotated[str | None, typer.Option("--loud", callback=_shout)] = None,
        size: Annotated[int, typer.Option("--size")] = 4,
        ratio: Annotated[float, typer.Option("--ratio")] = 0.5,
        name: Annotated[str, typer.Option("--name")] = "n",
        shade: Annotated[_Colour, typer.Option("--shade")] = _Colour.red,
        floor: Annotated[int, typer.Option("--floor", min=1)] = 2,
        half: Annotated[float, typer.Option("--half")] = 1,
    ) -> None:
        seen.update(need=need, colour=colour, count=count, tags=tags, loud=loud, size=size,
                    ratio=ratio, name=name, shade=shade, floor=floor, half=half)

    return app


def _runtime_params_built(app: typer.Typer, args: list[str]) -> dict[str, bool]:
    """Which parameters built typer's validator while parsing ``args``."""
    command = typer.main.get_command(app)
    with command.make_context("main", list(args)) as ctx:
        return {p.name: p._runtime_param is not None for p in ctx.command.params
                if isinstance(p, typer.core._TyperParameter)}


ARG_LISTS = (["--need", "3"], ["--need", "3", "--colour", "blue", "--count", "2", "--tag", "a",
                                "--tag", "b", "--loud", "hi", "--size", "5", "--ratio", "2",
                                "--name", "m", "--shade", "blue", "--floor", "3", "--half", "2"],
             ["--need", "3", "--count", "0"], ["--need", "3", "--colour", "green"],
             ["--colour", "red"], [], ["--need", "3", "--size", "1.5"], ["--need", "3", "--floor", "0"])


def _outcome(args: list[str]) -> tuple[int, str, dict]:
    seen: dict = {}
    result = CliRunner().invoke(_app(seen), args)
    return result.exit_code, result.output, seen


def test_every_outcome_is_typer_s_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values, exit codes and messages are those of typer's unpatched path."""
    monkeypatch.setattr(typer.core._TyperParameter, "process_value",
                        typer_defaults._TYPER_PROCESS_VALUE)
    expected = [_outcome(args) for args in ARG_LISTS]
    typer_defaults.install()
    assert [_outcome(args) for args in ARG_LISTS] == expected
    assert [code for code, _, _ in expected] == [0, 0, 2, 2, 2, 2, 2, 2]
    assert expected[0][2] == {"need": 3, "colour": None, "count": None, "tags": None,
                              "loud": None, "size": 4, "ratio": 0.5, "name": "n",
                              "shade": _Colour.red, "floor": 2, "half": 1.0}
    assert type(expected[0][2]["half"]) is float  # typer's coercion of an int default
    assert expected[1][2] == {"need": 3, "colour": _Colour.blue, "count": 2, "tags": ["a", "b"],
                              "loud": "HI", "size": 5, "ratio": 2.0, "name": "m",
                              "shade": _Colour.blue, "floor": 3, "half": 2.0}


def test_unset_options_build_no_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(typer.core._TyperParameter, "process_value",
                        typer_defaults._TYPER_PROCESS_VALUE)
    typer_defaults.install()
    built = _runtime_params_built(_app({}), ["--need", "3", "--count", "2", "--name", "n"])
    assert built["need"] and built["count"]  # given values go through typer's validator
    assert built["name"]  # given, even when equal to the default
    assert not built["colour"] and not built["tags"]  # unset
    assert not built["size"] and not built["ratio"] and not built["shade"]  # plain defaults
    assert built["floor"]  # a bounded option keeps typer's check
    assert built["half"]  # an int default of a float option is coerced by typer
    assert built["loud"]  # a parameter with a callback keeps typer's whole path


def _perfcast_models() -> list[type[BaseModel]]:
    import perfcast.calibration.bundle  # noqa: F401 - the models a train process builds
    import perfcast.catalog.systems  # noqa: F401
    import perfcast.estimate.training  # noqa: F401

    found, todo = [], [BaseModel]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("perfcast."):
                found.append(sub)
    return found


def test_no_model_has_a_builtin_default_factory() -> None:
    """pydantic parses a default factory's signature; for a builtin (``list``, ``dict``) that
    costs a process ~2.5 ms (inspect's text-signature tokenizer). ``[]`` / ``{}`` defaults are
    copied per instance by pydantic, so they are the same value."""
    models = _perfcast_models()
    assert len(models) > 20
    builtin = [f"{m.__module__}.{m.__name__}.{name}" for m in models
               for name, field in m.model_fields.items()
               if isinstance(field.default_factory, type)
               or inspect.isbuiltin(field.default_factory)]
    assert builtin == []


def test_text_mode_loads_no_emoji_table(tmp_path: Path) -> None:
    """``perfcast train`` without ``--json`` prints through rich but never imports rich's emoji
    table (``report.console.make_console``: ``emoji=False``)."""
    code = _CHILD.replace(", '--json'", "").replace(
        '"plugins_discovered"', '"emoji_table": "rich._emoji_codes" in sys.modules,\n    '
        '"plugins_discovered"')
    env = {k: v for k, v in os.environ.items() if k != "PERFCAST_NO_CACHE"}
    env["PERFCAST_CACHE_DIR"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=env)
    assert "tokens/s/GPU" in done.stdout
    seen = json.loads(done.stderr.strip().splitlines()[-1])
    assert "rich" in seen["top_level"]
    assert seen["emoji_table"] is False


def test_console_prints_colon_words_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    from perfcast.report.console import make_console

    make_console().print("note :fire: stays", highlight=False)
    assert "note :fire: stays" in capsys.readouterr().out
