"""`tally migrate`, `tally memory`, `tally tenants` and `tally keys`, run as a user would."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from backend.settings import load_settings
from tests.cli.runner import config, tally
from tests.conftest import serve

pytestmark = pytest.mark.process


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
    with sqlite3.connect(tmp_path / "t.db") as db:  # each change in the audit log, no secret
        logged = db.execute("SELECT actor, action, target, detail FROM audit_log ORDER BY id")
        audit = [tuple(row) for row in logged]
    assert [row[:3] for row in audit] == [
        ("operator", "tenant.create", ""),
        ("operator", "key.create", key_id),
        ("operator", "key.revoke", key_id),
        ("operator", "tenant.disable", ""),
    ]
    assert plain not in repr(audit)


async def test_a_disabled_tenant_is_enabled_again_from_the_command_line(tmp_path: Path) -> None:
    path = str(config(tmp_path, "auth: {mode: keys}\n"))
    assert tally("--config", path, "tenants", "create", "acme").returncode == 0
    key = tally("--config", path, "keys", "create", "acme").stdout.splitlines()[1]
    headers = {"Authorization": f"Bearer {key}"}
    app = create_app(load_settings(path), provider=ScriptedProvider())  # keys: no demo
    async with serve(app) as client:
        disabled = tally("--config", path, "tenants", "disable", "acme")
        refused = await client.get("/api/chat/sessions", headers=headers)
        enabled = tally("--config", path, "tenants", "enable", "acme")
        again = await client.get("/api/chat/sessions", headers=headers)
        listed = tally("--config", path, "tenants", "list").stdout

    assert "`tally tenants enable acme` undoes it" in disabled.stdout
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "tenant_disabled" and "`tally tenants enable acme`" in error["message"]
    assert '{"disabled": false}' in error["message"]  # the API's way, too
    assert enabled.returncode == 0 and "enabled tenant acme: its keys work again" in enabled.stdout
    assert again.status_code == 200 and "acme\tactive" in listed
    with sqlite3.connect(tmp_path / "t.db") as db:
        actions = [row[0] for row in db.execute("SELECT action FROM audit_log ORDER BY id")]
    assert actions[-2:] == ["tenant.disable", "tenant.enable"]


def test_enabling_a_tenant_that_does_not_exist_says_so(tmp_path: Path) -> None:
    result = tally("--config", str(config(tmp_path)), "tenants", "enable", "ghost")
    assert result.returncode == 1 and "'ghost' does not exist" in result.stderr
