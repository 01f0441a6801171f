"""`tally serve`: what it refuses before serving, and how it says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.runner import config, tally
from tests.cli.test_doctor import BROKEN, OPENAI

OPENAI_MODEL = OPENAI + "model: {provider: openai, name: gpt-4o-mini}\n"


def test_serve_refuses_a_public_host_without_keys(tmp_path: Path) -> None:
    result = tally("--config", str(config(tmp_path)), "serve", "--host", "0.0.0.0")
    assert result.returncode == 2
    assert "refusing to listen on 0.0.0.0" in result.stderr


@pytest.mark.parametrize(("extra", "problem"), BROKEN)
def test_a_config_error_stops_start_up_before_serving(
    tmp_path: Path, extra: str, problem: str
) -> None:
    path = config(tmp_path, extra)
    result = tally("--config", str(path), "serve", "--port", "0")
    assert result.returncode == 2
    assert f"{path}: invalid configuration" in result.stderr and problem in result.stderr
    assert "serving on" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("extra", "arguments"),
    [
        ("auth: {mode: keys}\n", ()),
        ("", ("--host", "0.0.0.0", "--insecure-public")),
    ],
)
def test_without_a_key_serving_beyond_the_local_demo_is_refused_naming_the_variable(
    tmp_path: Path, extra: str, arguments: tuple[str, ...]
) -> None:
    path = config(tmp_path, OPENAI_MODEL + extra)
    result = tally("--config", str(path), "serve", "--port", "0", *arguments)
    assert result.returncode == 2
    assert "model.provider: no LLM provider key is configured; set OPENAI_API_KEY" in result.stderr
    assert "serving on" not in result.stderr
