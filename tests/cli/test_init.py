"""`tally init [DIR]`: a commented config.yaml and the prompt templates, never overwriting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from backend.settings import load_settings
from tests.conftest import ROOT

pytestmark = pytest.mark.process

TEMPLATES = sorted(path.name for path in (ROOT / "prompts").iterdir() if path.is_file())


def init(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "backend", "init", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def test_init_writes_the_shipped_config_and_prompts_and_names_the_next_command(
    tmp_path: Path,
) -> None:
    result = init(cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "config.yaml").read_bytes() == (ROOT / "config.yaml").read_bytes()
    assert sorted(path.name for path in (tmp_path / "prompts").iterdir()) == TEMPLATES
    for name in TEMPLATES:
        shipped = (ROOT / "prompts" / name).read_bytes()
        assert (tmp_path / "prompts" / name).read_bytes() == shipped
    assert "wrote config.yaml" in result.stdout
    assert f"wrote {Path('prompts') / 'system.md.j2'}" in result.stdout
    assert result.stdout.rstrip().endswith("tally serve")


def test_init_into_a_new_directory_says_to_cd_there(tmp_path: Path) -> None:
    target = tmp_path / "deploy" / "tally"
    result = init(str(target), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (target / "config.yaml").is_file()
    assert (target / "prompts" / "system.md.j2").is_file()
    assert result.stdout.rstrip().endswith(f"cd {target} && tally serve")


def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("persona: {name: Mine}\n", encoding="utf-8")
    result = init(cwd=tmp_path)
    assert result.returncode == 1
    assert "config.yaml" in result.stderr
    assert "--force" in result.stderr
    assert (tmp_path / "config.yaml").read_text(encoding="utf-8") == "persona: {name: Mine}\n"
    assert not (tmp_path / "prompts").exists()


def test_init_refuses_when_only_a_template_exists(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "system.md.j2").write_text("mine", encoding="utf-8")
    result = init(cwd=tmp_path)
    assert result.returncode == 1
    assert str(Path("prompts") / "system.md.j2") in result.stderr
    assert not (tmp_path / "config.yaml").exists()
    assert (tmp_path / "prompts" / "system.md.j2").read_text(encoding="utf-8") == "mine"


def test_init_force_overwrites_the_shipped_files_only(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("persona: {name: Mine}\n", encoding="utf-8")
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "custom.md.j2").write_text("keep me", encoding="utf-8")
    result = init("--force", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "config.yaml").read_bytes() == (ROOT / "config.yaml").read_bytes()
    assert (tmp_path / "prompts" / "custom.md.j2").read_text(encoding="utf-8") == "keep me"


def test_an_initialised_directory_keeps_its_data_and_uses_its_own_prompts(
    tmp_path: Path,
) -> None:
    assert init(cwd=tmp_path).returncode == 0
    settings = load_settings(tmp_path / "config.yaml")
    assert settings.prompts_dir == str(tmp_path / "prompts")
    assert settings.database.url == f"sqlite+aiosqlite:///{tmp_path / 'data' / 'tally.db'}"
    assert settings.memory.path == str(tmp_path / "MEMORY.md")
    assert settings.data_dir == str(tmp_path / "data")
