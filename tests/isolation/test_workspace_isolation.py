"""Workspace isolation in real turns: two tenants in keys mode, each with the workspace turned on
through the admin API, share one fake OpenAI server. acme's model writes `secret.txt`; globex's
model then reaches for it by every path a model might try. globex's results (as its own key
reads them back) and its model's requests never show acme's file, and globex's own file of the
same name is globex's alone.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.app import create_app
from tests.api.test_auth import ADMIN_KEY, bearer
from tests.conftest import make_settings, serve
from tests.fakes import Call, Step, ToolCalls
from tests.fakes.openai_server import FakeOpenAIServer
from tests.isolation.conftest import OPERATOR

ACME_SECRET = "acme's secret"
GLOBEX_OWN = "globex's own"
WORKSPACE_ON = {"tools": {"enabled": ["now"], "workspace": {"enabled": True}}}


@dataclass
class Turns:
    """Turns of one tenant against the shared fake server: each pushes its model's steps just
    before it is sent, so the server plays them in the order turns arrive."""

    client: httpx.AsyncClient
    vendor: FakeOpenAIServer
    chat_key: str

    async def send(self, message: str, *steps: Step) -> tuple[str, list[dict[str, Any]]]:
        """The turn's reply and the model requests it caused; its tool results are stored."""
        self.vendor.push(*steps)
        first = len(self.vendor.requests)
        sent = await self.client.post(
            "/api/chat/send", headers=bearer(self.chat_key), json={"message": message}
        )
        assert sent.status_code == 200, sent.text
        requests = [r.body for r in self.vendor.requests[first:]]
        return sent.json()["session_id"], requests

    async def results(self, session_id: str) -> dict[str, tuple[str, bool]]:
        """(result, is_error) by tool call id, read back with this tenant's own key."""
        listed = await self.client.get(
            f"/api/chat/sessions/{session_id}/tool-conversations", headers=bearer(self.chat_key)
        )
        assert listed.status_code == 200, listed.text
        rows = listed.json()["tool_conversations"]
        return {row["tool_call_id"]: (row["result"], row["is_error"]) for row in rows}


@pytest.fixture
def vendor() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
async def served(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    vendor: FakeOpenAIServer,
) -> AsyncIterator[tuple[httpx.AsyncClient, Path]]:
    """Tally in keys mode with the workspace off by default; the client and the folder holding
    the tenants' workspaces."""
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    settings = make_settings(
        database_url,
        tmp_path,
        auth={"mode": "keys"},
        providers={"llm": {"kind": "openai_compatible", "base_url": vendor.base_url}},
        model={"provider": "llm", "name": "gpt-4o-mini"},
        tools={"enabled": ["now"]},
    )
    async with serve(create_app(settings)) as client:
        yield client, Path(settings.data_dir) / "workspaces"


async def open_tenant(client: httpx.AsyncClient, tenant_id: str, vendor: FakeOpenAIServer) -> Turns:
    """A tenant with the workspace on (through the admin API) and a chat key."""
    created = await client.post(
        "/api/admin/tenants", headers=OPERATOR, json={"id": tenant_id, "settings": WORKSPACE_ON}
    )
    assert created.status_code == 201, created.text
    key = await client.post(
        f"/api/admin/tenants/{tenant_id}/keys", headers=OPERATOR, json={"scope": "chat"}
    )
    assert key.status_code == 201, key.text
    return Turns(client, vendor, key.json()["key"])


async def test_a_tenants_workspace_is_invisible_to_another_tenants_model(
    served: tuple[httpx.AsyncClient, Path], vendor: FakeOpenAIServer
) -> None:
    client, workspaces = served
    acme = await open_tenant(client, "acme", vendor)
    globex = await open_tenant(client, "globex", vendor)

    acme_write = Call("write_file", {"path": "secret.txt", "content": ACME_SECRET}, id="a_write")
    acme_session, _ = await acme.send("keep my secret", ToolCalls([acme_write]), "Kept.")
    probes = [
        Call("read_file", {"path": "secret.txt"}, id="b_same_name"),
        Call("read_file", {"path": "../acme/secret.txt"}, id="b_up"),
        Call("read_file", {"path": "acme/secret.txt"}, id="b_tenant_folder"),
        Call("read_file", {"path": "../../workspaces/acme/secret.txt"}, id="b_up_twice"),
        Call("list_files", {}, id="b_list"),
        Call("list_files", {"path": "../acme"}, id="b_list_up"),
    ]
    probe_session, probe_requests = await globex.send(
        "look around the files", ToolCalls(probes), "Nothing found."
    )
    globex_write = Call("write_file", {"path": "secret.txt", "content": GLOBEX_OWN}, id="b_write")
    own_read = Call("read_file", {"path": "secret.txt"}, id="b_own_read")
    own_session, own_requests = await globex.send(
        "keep mine", ToolCalls([globex_write]), ToolCalls([own_read]), "Kept yours."
    )
    acme_read = Call("read_file", {"path": "secret.txt"}, id="a_read")
    acme_read_session, _ = await acme.send("read my secret", ToolCalls([acme_read]), "Here.")

    probed = await globex.results(probe_session)
    assert probed == {
        "b_same_name": ("error: secret.txt: no such file or directory", True),
        "b_up": ("error: path must not contain '..'", True),
        "b_tenant_folder": ("error: acme/secret.txt: no such file or directory", True),
        "b_up_twice": ("error: path must not contain '..'", True),
        "b_list": ("the workspace is empty", False),
        "b_list_up": ("error: path must not contain '..'", True),
    }
    own = await globex.results(own_session)
    assert own["b_own_read"] == ("[File: secret.txt | Lines: 1]\nglobex's own", False)
    globex_seen = json.dumps([probed, own, probe_requests, own_requests], ensure_ascii=False)
    assert ACME_SECRET not in globex_seen
    assert "secret.txt (" not in json.dumps(probed)  # no listing names acme's file

    assert (await acme.results(acme_read_session))["a_read"] == (
        "[File: secret.txt | Lines: 1]\nacme's secret",
        False,
    )
    assert (await acme.results(acme_session))["a_write"][1] is False
    assert (workspaces / "acme" / "secret.txt").read_text() == ACME_SECRET
    assert (workspaces / "globex" / "secret.txt").read_text() == GLOBEX_OWN
    # Each key reads back only its own tenant's sessions.
    foreign = await client.get(
        f"/api/chat/sessions/{acme_session}/tool-conversations", headers=bearer(globex.chat_key)
    )
    assert foreign.status_code == 404
