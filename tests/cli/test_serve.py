"""`tally serve`: what it refuses before serving."""

from __future__ import annotations

from pathlib import Path

from tests.cli.runner import config, tally


def test_serve_refuses_a_public_host_without_keys(tmp_path: Path) -> None:
    result = tally("--config", str(config(tmp_path)), "serve", "--host", "0.0.0.0")
    assert result.returncode == 2
    assert "refusing to listen on 0.0.0.0" in result.stderr
