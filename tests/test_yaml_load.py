"""``perfcast.yaml_load``: the C-parsed, content-keyed cached YAML equals ``yaml.safe_load``."""

from __future__ import annotations

import pytest
import yaml

from perfcast.catalog.files import DATA_DIR
from perfcast.yaml_load import MalformedYaml, safe_load

TEXT = "a: 1\nb: [2.5, 'x', null, true]\nc: {d: 1e-3}\n"


def test_equals_pyyaml_and_caches_by_content(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFCAST_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PERFCAST_NO_CACHE", raising=False)
    assert safe_load(TEXT) == yaml.safe_load(TEXT)
    cached = list(tmp_path.glob("*.marshal"))
    assert len(cached) == 1
    assert safe_load(TEXT) == yaml.safe_load(TEXT)  # from the cache
    safe_load(TEXT + "e: 2\n")  # other content, other key
    assert len(list(tmp_path.glob("*.marshal"))) == 2


def test_shipped_catalog_files_parse_identically(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFCAST_CACHE_DIR", str(tmp_path))
    for path in sorted(DATA_DIR.rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        assert safe_load(text) == yaml.safe_load(text), path
        assert safe_load(text) == yaml.safe_load(text), path  # cached copy


def test_malformed_is_an_error_and_never_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFCAST_CACHE_DIR", str(tmp_path))
    with pytest.raises(MalformedYaml):
        safe_load("a: [1, 2\n")
    assert not list(tmp_path.iterdir())


def test_no_cache_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFCAST_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PERFCAST_NO_CACHE", "1")
    assert safe_load(TEXT) == yaml.safe_load(TEXT)
    assert not list(tmp_path.iterdir())
