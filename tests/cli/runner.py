"""Running `tally` as a user would: a small config in tmp_path, the command in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        f'database: {{url: "sqlite+aiosqlite:///{tmp_path}/t.db"}}\n'
        f"prompts_dir: {ROOT / 'prompts'}\n"
        f"memory: {{path: {tmp_path / 'MEMORY.md'}}}\n" + extra,
        encoding="utf-8",
    )
    return path


def tally(
    *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    return subprocess.run(
        [sys.executable, "-m", "backend", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**environment, **(env or {})},
    )
