"""A body that is not JSON: every route says where the text breaks and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from tests.conftest import make_settings, serve

# A comma is missing after "hi": line 3, column 3 is where the next key starts.
BROKEN = b'{\n  "message": "hi"\n  "messages": []\n}'
ON_ONE_LINE = b'{"message": "hi" "stream": false}'


@pytest.mark.parametrize("path", ["/api/chat/send", "/v1/chat/completions"])
async def test_malformed_json_says_where_and_what(
    sqlite_url: str, tmp_path: Path, path: str
) -> None:
    provider = ScriptedProvider()
    app = create_app(make_settings(sqlite_url, tmp_path), provider=provider)
    headers = {"content-type": "application/json", "X-Tally-Session": "s1"}
    async with serve(app) as client:
        broken = await client.post(path, content=BROKEN, headers=headers)
        one_line = await client.post(path, content=ON_ONE_LINE, headers=headers)
        sessions = (await client.get("/api/chat/sessions")).json()
    assert broken.status_code == one_line.status_code == 422  # as every invalid body
    assert broken.json()["error"]["code"] == one_line.json()["error"]["code"] == "invalid_json"
    assert broken.json()["error"]["message"] == (
        "invalid JSON at line 3, column 3: Expecting ',' delimiter"
    )
    assert one_line.json()["error"]["message"] == (
        "invalid JSON at line 1, column 18: Expecting ',' delimiter"
    )
    if path.startswith("/v1/"):  # the facade's errors carry OpenAI's type too
        assert broken.json()["error"]["type"] == "invalid_request_error"
    assert provider.requests == []
    assert sessions["total"] == 0
