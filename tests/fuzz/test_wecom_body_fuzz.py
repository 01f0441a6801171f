"""Fuzzing a WeCom app's callbacks (the XML counterpart of test_channel_body_fuzz.py): past a
valid signature, Hypothesis sends the app WeCom's real message with a field replaced by any
text or markup (entities, CDATA ends, nesting, characters XML cannot carry), and arbitrary
bytes as the message, encrypted and signed as WeCom does; and arbitrary bytes as the envelope,
unsigned. Every signed body is answered 200 (kept, or refused and recorded), every unsigned
one 401, never an error; the app still answers a good message at the end. Derandomized."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import hypothesis
import pytest
from hypothesis import strategies as st

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from tests.channels.wecom_fixtures import APP, app_settings, running_wecom
from tests.conftest import make_settings
from tests.fakes.wecom_server import FakeWeComServer, signed_query
from tests.fuzz.test_schema_fuzz import served_in_thread
from tests.waiting import until_blocking

FUZZ_SETTINGS = hypothesis.settings(
    max_examples=300,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(hypothesis.HealthCheck),
    phases=[hypothesis.Phase.generate, hypothesis.Phase.shrink],
)
FIELDS = ["ToUserName", "FromUserName", "CreateTime", "MsgType", "Content", "MsgId", "AgentID"]
MARKUP = st.sampled_from(
    ["<", ">", "&", "&amp;", "&#0;", "&#x1F600;", "]]>", "<![CDATA[", "<a>", "</a>", "<!DOCTYPE x>"]
)
ANY_TEXT = st.text(st.characters(codec=None, categories=None), max_size=40)
VALUES = st.lists(MARKUP | ANY_TEXT, max_size=6).map("".join) | st.integers().map(str)
PATH = "/channels/default/wc"


def message_with(field: str, value: str, n: int) -> bytes:
    fields = {
        "ToUserName": f"<![CDATA[{APP.corp_id}]]>",
        "FromUserName": "<![CDATA[ada]]>",
        "CreateTime": "1700000000",
        "MsgType": "<![CDATA[text]]>",
        "Content": "<![CDATA[hello]]>",
        "MsgId": str(10**17 + n),
        "AgentID": str(APP.agent_id),
    } | {field: value}
    xml = "<xml>" + "".join(f"<{k}>{v}</{k}>" for k, v in fields.items()) + "</xml>"
    return xml.encode("utf-8", "surrogatepass")


@pytest.fixture
def wecom(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeWeComServer]:
    yield from running_wecom(monkeypatch)


@pytest.mark.slow
def test_no_wecom_body_is_answered_with_an_error(
    wecom: FakeWeComServer, sqlite_url: str, tmp_path: Path
) -> None:
    settings = make_settings(sqlite_url, tmp_path, channels={"wc": app_settings(wecom)})
    app = create_app(settings, provider=ScriptedProvider(replies=["ok"]))
    counter = iter(range(1, 1_000_000))
    with served_in_thread(app) as (portal, client):

        def post_signed(plaintext: bytes) -> int:
            query, body = wecom.callback(APP, plaintext)
            return portal.call(lambda: client.post(PATH, params=query, content=body)).status_code

        @FUZZ_SETTINGS
        @hypothesis.given(st.sampled_from(FIELDS), VALUES)
        def mutated(field: str, value: str) -> None:
            body = message_with(field, value, next(counter))
            assert post_signed(body) == 200, body[:300]

        @FUZZ_SETTINGS
        @hypothesis.given(st.binary(max_size=300))
        def any_message(plaintext: bytes) -> None:
            assert post_signed(plaintext) == 200, plaintext[:300]

        @FUZZ_SETTINGS
        @hypothesis.given(st.binary(max_size=300))
        def any_envelope(body: bytes) -> None:
            query = signed_query(APP.token, "")
            answer = portal.call(lambda: client.post(PATH, params=query, content=body))
            assert answer.status_code == 401, (body[:300], answer.text[:300])

        mutated()
        any_message()
        any_envelope()
        before = len(wecom.sent())
        assert post_signed(wecom.message_xml("a good one", app=APP)) == 200
        still_answers = until_blocking(
            lambda: len(wecom.sent()) > before, "the WeCom app answering a good message"
        )
    assert still_answers
