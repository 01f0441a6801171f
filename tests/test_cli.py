"""The `tally` command: migrate, memory, doctor and chat, run as a user would."""

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


def test_migrate_then_memory_edit_show_and_search(tmp_path: Path) -> None:
    path = config(tmp_path)
    assert "newest schema" in tally("--config", str(path), "migrate").stdout
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\necho "2026-03-04|manual|Ada likes green tea" >> "$1"\n')
    editor.chmod(0o755)
    edited = tally("--config", str(path), "memory", "edit", env={"EDITOR": str(editor)})
    assert edited.returncode == 0 and "saved: 1 entries" in edited.stdout
    shown = tally("--config", str(path), "memory", "show")
    assert "2026-03-04|manual|Ada likes green tea" in shown.stdout
    found = tally("--config", str(path), "memory", "search", "tea")
    assert "Ada likes green tea" in found.stdout
    missing = tally("--config", str(path), "memory", "search")
    assert missing.returncode == 2


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


def test_terminal_chat_streams_a_demo_reply(tmp_path: Path) -> None:
    result = tally("--config", str(config(tmp_path)), "chat", stdin="hello there\n\n")
    assert result.returncode == 0
    assert "demo provider" in result.stdout and "hello there" in result.stdout


def test_serve_refuses_a_public_host_without_keys(tmp_path: Path) -> None:
    result = tally("--config", str(config(tmp_path)), "serve", "--host", "0.0.0.0")
    assert result.returncode == 2
    assert "refusing to listen on 0.0.0.0" in result.stderr


def test_tenants_and_keys_from_the_command_line(tmp_path: Path) -> None:
    path = str(config(tmp_path))
    created = tally("--config", path, "tenants", "create", "acme", "--name", "Acme")
    assert created.returncode == 0 and "created tenant acme" in created.stdout
    duplicate = tally("--config", path, "tenants", "create", "acme")
    assert duplicate.returncode == 1 and "tenant_exists" in duplicate.stderr
    key = tally("--config", path, "keys", "create", "acme", "--label", "ci")
    key_id, plain = key.stdout.split()[0], key.stdout.splitlines()[1]
    assert plain.startswith("tly_") and "shown once" in key.stdout
    listed = tally("--config", path, "keys", "list", "acme")
    assert key_id in listed.stdout and plain not in listed.stdout and "active" in listed.stdout
    assert tally("--config", path, "keys", "revoke", key_id).returncode == 0
    assert "revoked" in tally("--config", path, "keys", "list", "acme").stdout
    assert "disabled" in tally("--config", path, "tenants", "disable", "acme").stdout
    assert "acme\tdisabled" in tally("--config", path, "tenants", "list").stdout
