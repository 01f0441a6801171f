"""`make run` says what it does before it does it: that it installs (once, and roughly how
long), then that it starts Tally; `make test` the same for its tools. Read from `make -n` (what
make would run), so the check costs no install."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.process


def planned(target: str, venv: Path) -> list[str]:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


@pytest.mark.parametrize(("target", "lock"), [("run", "run.txt"), ("test", "dev.txt")])
def test_a_fresh_install_is_announced_with_its_duration_before_it_starts(
    tmp_path: Path, target: str, lock: str
) -> None:
    lines = planned(target, tmp_path / "venv")
    said = [line for line in lines if line.startswith("echo ")]
    install = next(i for i, line in enumerate(lines) if f"-r requirements/{lock}" in line)
    first_word = next(i for i, line in enumerate(lines) if line.startswith("echo "))
    assert first_word < install  # said before the minute of silence, not after
    assert any("installing" in line and f"requirements/{lock}" in line for line in said)
    assert any("once" in line and "minute" in line for line in said)


def test_make_run_says_it_starts_tally_after_installing(tmp_path: Path) -> None:
    lines = planned("run", tmp_path / "venv")
    serve = next(i for i, line in enumerate(lines) if "tally --config config.yaml serve" in line)
    assert "starting Tally" in lines[serve - 1]
