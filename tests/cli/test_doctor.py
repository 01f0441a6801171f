"""`tally doctor`: what it checks and what it tells the user to fix."""

from __future__ import annotations

from pathlib import Path

from tests.cli.runner import config, tally


def test_doctor_says_what_to_fix(tmp_path: Path) -> None:
    path = config(
        tmp_path,
        "providers:\n  openai: {kind: openai_compatible, api_key_env: OPENAI_API_KEY}\n"
        "model: {provider: openai, name: gpt-4o-mini}\n",
    )
    result = tally("--config", str(path), "doctor")
    assert result.returncode == 1
    assert "ok    database" in result.stdout
    assert "FAIL  provider" in result.stdout and "OPENAI_API_KEY" in result.stdout
    broken = tally("--config", str(tmp_path / "missing.yaml"), "doctor")
    assert broken.returncode == 1 and "FAIL  config" in broken.stdout
