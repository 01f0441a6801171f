"""Which config a command reads: the one named, else ./config.yaml, else the built-in defaults
with the data in the working directory; and where the prompts come from."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.settings import load_settings
from tests.conftest import ROOT

pytestmark = pytest.mark.process


def tally_in(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "TALLY_CONFIG"}
    return subprocess.run(
        [sys.executable, "-m", "backend", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**environment, **(env or {})},
    )


def test_no_config_file_runs_on_builtin_defaults_in_the_working_directory(
    tmp_path: Path,
) -> None:
    result = tally_in(tmp_path, "migrate")
    assert result.returncode == 0, result.stderr
    assert "running on built-in defaults" in result.stderr
    assert "tally init" in result.stderr
    assert str(tmp_path) in result.stderr
    assert (tmp_path / "data" / "tally.db").is_file()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["data"]


def test_builtin_defaults_put_the_data_here_and_use_the_bundled_prompts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TALLY_CONFIG", raising=False)
    (tmp_path / "prompts").mkdir()  # not a config's folder: the defaults do not look here
    with caplog.at_level(logging.INFO, logger="tally"):
        settings = load_settings()
    assert settings.database.url == f"sqlite+aiosqlite:///{tmp_path / 'data' / 'tally.db'}"
    assert settings.memory.path == str(tmp_path / "MEMORY.md")
    assert settings.data_dir == str(tmp_path / "data")
    assert settings.prompts_dir == str(ROOT / "prompts")
    assert settings.model is None
    [line] = [r.getMessage() for r in caplog.records if "built-in defaults" in r.getMessage()]
    assert "data/tally.db" in line and "MEMORY.md" in line and "`tally init`" in line


def test_a_named_config_file_that_is_missing_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    result = tally_in(tmp_path, "--config", str(missing), "migrate")
    assert result.returncode == 2
    assert f"{missing}: cannot read the config file" in result.stderr
    result = tally_in(tmp_path, "migrate", env={"TALLY_CONFIG": str(missing)})
    assert result.returncode == 2
    assert f"{missing}: cannot read the config file" in result.stderr
    assert not (tmp_path / "data").exists()


def test_a_config_without_prompts_dir_uses_the_prompts_beside_it_else_the_bundled(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("persona: {name: Ada}\n", encoding="utf-8")
    assert load_settings(config).prompts_dir == str(ROOT / "prompts")
    (tmp_path / "prompts").mkdir()
    assert load_settings(config).prompts_dir == str(tmp_path / "prompts")


def test_a_prompts_dir_set_in_the_config_is_relative_to_it(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("prompts_dir: templates\n", encoding="utf-8")
    assert load_settings(config).prompts_dir == str(tmp_path / "templates")


def test_the_checkout_config_reads_the_checkout_prompts() -> None:
    assert load_settings(ROOT / "config.yaml").prompts_dir == str(ROOT / "prompts")
