"""What a deployment writes stays out of git: a demo chat in a checkout leaves `git status`
clean, while the default tenant's MEMORY.md appears at the top level from the first start."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from backend.memory.entries import parse_document
from tests.conftest import ROOT
from tests.crash import SETTLE_TIMEOUT_S, ServerFiles, TallyProcess, create_session, send_turn
from tests.waiting import until_blocking

pytestmark = pytest.mark.process

SHIPPED = (".gitignore", "config.yaml", "MEMORY.example.md")
FACTS = [
    "My name is Ada and my email is ada@example.org.",
    "My phone number is +351 912 345 678.",
    "Remember that I park on level 3.",
    "I like green tea.",
    "What is the weather like?",
    "Tell me a joke.",
]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout holding the shipped config.yaml and .gitignore, as cloned."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "tally"
    repo.mkdir()
    for name in SHIPPED:
        shutil.copy(ROOT / name, repo / name)
    git(repo, "init", "--quiet")
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "-m", "as cloned")
    # The test's own server log, not something Tally writes.
    (repo / ".git" / "info" / "exclude").write_text("/server.log\n", encoding="utf-8")
    return repo


def memory_lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [entry.content for entry in parse_document(path.read_text(encoding="utf-8")).entries]


def test_a_demo_chat_leaves_git_status_clean(checkout: Path) -> None:
    with TallyProcess(ServerFiles(checkout)) as server:
        assert (checkout / "MEMORY.md").exists()  # where memory lives, from the first start
        with server.client() as client:
            session_id = create_session(client)
            for text in FACTS:
                send_turn(client, session_id, text)
        lines = until_blocking(
            lambda: memory_lines(checkout / "MEMORY.md"),
            "a memory line in MEMORY.md",
            timeout_s=SETTLE_TIMEOUT_S,
            poll_s=0.1,
        )

    assert any("ada@example.org" in line for line in lines)
    assert (checkout / "data" / "tally.db").exists()
    assert git(checkout, "status", "--porcelain", "--untracked-files=all") == ""
