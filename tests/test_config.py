"""Where bm keeps things and how settings override each other."""
from __future__ import annotations

from pathlib import Path

import pytest

from brandmind.config import Config, resolve_paths, write_config_value
from brandmind.errors import ConfigError


def test_bm_home_puts_everything_in_one_directory(tmp_path: Path) -> None:
    paths = resolve_paths(tmp_path / "h")
    assert paths.config_file == tmp_path / "h" / "config.toml"
    assert paths.data_dir == tmp_path / "h" / "data"
    assert not paths.cache_dir.is_relative_to(tmp_path / "h")  # the model cache is shared, not per store


def test_xdg_directories_when_bm_home_is_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BM_HOME")
    monkeypatch.delenv("BM_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    paths = resolve_paths()
    assert paths.config_file == tmp_path / "cfg" / "brandmind" / "config.toml"
    assert paths.data_dir == tmp_path / "data" / "brandmind"
    assert paths.cache_dir == tmp_path / "cache" / "brandmind"


def test_xdg_defaults_under_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BM_HOME")
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    paths = resolve_paths()
    assert paths.config_file == tmp_path / ".config" / "brandmind" / "config.toml"
    assert paths.data_dir == tmp_path / ".local" / "share" / "brandmind"


def test_file_then_environment_then_arguments(bm_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BM_EMBEDDER")
    assert Config.load().user == "default"
    write_config_value(resolve_paths(), "user", "ann")
    write_config_value(resolve_paths(), "blob_threshold", "2048")
    cfg = Config.load()
    assert (cfg.user, cfg.blob_threshold, cfg.embedder) == ("ann", 2048, "local")
    monkeypatch.setenv("BM_USER", "bob")
    assert Config.load().user == "bob"
    assert Config.load(user="cy").user == "cy"


@pytest.mark.parametrize("key,value", [("blob_threshold", "many"), ("blob_threshold", "-5"),
                                       ("embedder", "bogus"), ("local_variant", "fp16"), ("nope", "x")])
def test_bad_values_are_refused_and_the_file_is_unchanged(bm_home: Path, key: str, value: str) -> None:
    write_config_value(resolve_paths(), "user", "ann")
    before = resolve_paths().config_file.read_text()
    with pytest.raises(ConfigError) as err:
        write_config_value(resolve_paths(), key, value)
    assert err.value.hint
    assert resolve_paths().config_file.read_text() == before


def test_a_broken_config_file_is_a_clear_error(bm_home: Path) -> None:
    resolve_paths().config_file.write_text("user = [unclosed\n")
    with pytest.raises(ConfigError) as err:
        Config.load()
    assert "config.toml" in err.value.message and "delete it" in err.value.hint
