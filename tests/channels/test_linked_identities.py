"""One person across channels: Ada links her Telegram account, her DingTalk account and the
key her tenant's web app gives her, with one-time codes; a fact she tells on Telegram is in the
prompt when she asks on DingTalk and on the web, and never in Bob's. The real
python-telegram-bot and dingtalk-stream against the fake Bot API and the fake DingTalk
gateway, one Tally serving both bots."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from backend.app import create_app
from backend.chat.linking import LINK_ATTEMPTS
from backend.domain.messages import ToolCall
from backend.providers.scripted import ScriptedProvider, ScriptedToolCalls
from tests.channels.conftest import (
    CLIENT_ID,
    TOKEN,
    Served,
    ServedRobot,
    bot_settings,
    robot_settings,
)
from tests.channels.discord_fixtures import (
    DISCORD_TOKEN,
    ServedDiscord,
    discord_settings,
)
from tests.channels.feishu_fixtures import APP_ID as FEISHU_APP
from tests.channels.feishu_fixtures import ServedFeishu, feishu_settings
from tests.channels.qq_fixtures import ServedQQ, qq_settings
from tests.channels.slack_fixtures import ServedSlack, serving_slack
from tests.channels.wecom_fixtures import ServedApp
from tests.channels.wecom_fixtures import app_settings as wecom_app_settings
from tests.conftest import make_settings, serve
from tests.fakes.dingtalk_server import FakeDingTalkServer
from tests.fakes.discord_server import FakeDiscordServer
from tests.fakes.feishu_server import FakeFeishuServer
from tests.fakes.qq_server import FakeQQServer
from tests.fakes.slack_server import FakeSlackServer
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fakes.wecom_server import FakeWeComServer
from tests.prompt_text import prompt_text

ADA_TELEGRAM = 42  # her user id, and her private chat with the bot
BOB_TELEGRAM = 77
ADA_WEB = "ada@example.com"  # the key the tenant's web app knows her by
CODE = re.compile(r"[A-Z2-9]{4}-[A-Z2-9]{4}")


@asynccontextmanager
async def serving_both(
    telegram: FakeTelegramServer,
    dingtalk: FakeDingTalkServer,
    tmp_path: Path,
    database_url: str,
    provider: ScriptedProvider,
    *,
    scope: str = "user",
    memory: dict[str, object] | None = None,
) -> AsyncIterator[tuple[Served, ServedRobot]]:
    """Tally serving Telegram bot `tg` and DingTalk robot `dt` (connected) for one tenant."""
    settings = make_settings(
        database_url,
        tmp_path,
        channels={"tg": bot_settings(telegram), "dt": robot_settings(dingtalk)},
        memory={"path": str(tmp_path / "MEMORY.md"), "scope": scope, **(memory or {})},
    )
    app = create_app(settings, provider=provider)
    async with serve(app) as client:
        await asyncio.to_thread(dingtalk.wait_connected, CLIENT_ID)
        yield Served(app, client, telegram, provider), ServedRobot(app, client, dingtalk, provider)


async def on_telegram(served: Served, text: str, *, user: int = ADA_TELEGRAM) -> str:
    """`text` from `user` in their private chat; the bot's answer."""
    before = len(served.telegram.sent(user, "sendMessage"))
    message = served.telegram.user_message(text, chat_id=user, user_id=user, username=f"u{user}")
    served.telegram.push_update(TOKEN, message)
    return (await served.sent(before + 1, chat_id=user))[-1].text


async def on_dingtalk(robot: ServedRobot, text: str, *, staff: str = "staff-ada") -> str:
    """`text` from `staff` in their private conversation with the robot; its answer."""
    before = len(robot.dingtalk.sent())  # one conversation at a time: each answer is the last
    await robot.push(
        robot.message(text, conversation_id=f"cid-{staff}", sender_staff_id=staff, sender_id=staff)
    )
    return (await robot.sent(before + 1))[-1].text


def code_in(reply: str) -> str:
    found = CODE.search(reply)
    assert found is not None, reply
    return found.group()


async def test_a_fact_told_on_telegram_reaches_the_linked_person_on_dingtalk_and_the_web(
    telegram: FakeTelegramServer, dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    remember = ToolCall(id="w", name="memory_write", arguments={"fact": "Ada is allergic to kiwi"})
    provider = ScriptedProvider(replies=["ok"])
    async with serving_both(telegram, dingtalk, tmp_path, database_url, provider) as (tg, dt):
        # What DingTalk knew of Ada before she linked comes along.
        before = await tg.client.post(
            "/api/memory/entries",
            params={"user": "dingtalk:staff-ada"},
            json={"content": "Ada works nights"},
        )
        assert before.status_code == 201, before.text

        asked = await on_telegram(tg, "/link")
        linked = await on_dingtalk(dt, f"/link {code_in(asked).lower()}")  # typed any case
        web_code = await tg.client.post("/api/people/link-codes", json={"user": ADA_WEB})
        assert web_code.status_code == 201, web_code.text
        linked_too = await on_telegram(tg, f"/link {web_code.json()['code']}")
        person = await tg.client.get("/api/people/links", params={"user": ADA_WEB})

        provider.push(ScriptedToolCalls([remember]), "Noted.")
        await on_telegram(tg, "remember: I am allergic to kiwi")
        await on_dingtalk(dt, "what fruit should I avoid?")
        on_ding = prompt_text(provider.requests[-1])
        web = await tg.client.post("/api/chat/send", json={"message": "any food?", "user": ADA_WEB})
        on_web = prompt_text(provider.requests[-1])
        await on_telegram(tg, "what fruit should I avoid?", user=BOB_TELEGRAM)
        bobs = prompt_text(provider.requests[-1])
        await on_dingtalk(dt, "and me?", staff="staff-bob")
        bobs_ding = prompt_text(provider.requests[-1])

    assert "share one memory" in linked and "share one memory" in linked_too
    assert person.status_code == 200 and sorted(person.json()["identities"]) == sorted(
        [ADA_WEB, "dingtalk:staff-ada", f"telegram:{ADA_TELEGRAM}"]
    )
    assert web.status_code == 200, web.text
    for prompt in (on_ding, on_web):
        assert "Ada is allergic to kiwi" in prompt and "Ada works nights" in prompt
    for prompt in (bobs, bobs_ding):  # another person of the same tenant
        assert "kiwi" not in prompt and "nights" not in prompt


async def test_a_code_works_once_and_only_from_the_other_account(
    telegram: FakeTelegramServer, dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["ok"])
    async with serving_both(telegram, dingtalk, tmp_path, database_url, provider) as (tg, dt):
        code = code_in(await on_telegram(tg, "/link"))
        own = await on_telegram(tg, f"/link {code}")
        first = await on_dingtalk(dt, f"/link {code}")
        again = await on_dingtalk(dt, f"/link {code}", staff="staff-bob")
        unknown = await on_dingtalk(dt, "/link AAAA-BBBB", staff="staff-bob")
        unlinked = await on_dingtalk(dt, "/unlink")
        not_linked = await on_dingtalk(dt, "/unlink")
        links = await tg.client.get("/api/admin/tenants/default/links")
    assert "from your other account" in own
    assert "share one memory" in first
    assert "used already" in again and "does not exist" in unknown
    assert "Unlinked" in unlinked and "not linked" in not_linked
    assert links.json()["identities"] == []  # the one left is on its own again


async def test_linking_is_refused_where_memory_is_the_tenants(
    telegram: FakeTelegramServer, dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["ok"])
    async with serving_both(
        telegram, dingtalk, tmp_path, database_url, provider, scope="tenant"
    ) as (tg, dt):
        said = await on_telegram(tg, "/link")
        said_too = await on_dingtalk(dt, "/link ABCD-EFGH")
        api = await tg.client.post("/api/people/link-codes", json={"user": ADA_WEB})
    assert "one memory for everyone" in said and "one memory for everyone" in said_too
    assert api.status_code == 409 and api.json()["error"]["code"] == "memory_not_personal"


async def test_a_group_chat_does_not_link_and_keeps_the_tenants_memory(
    telegram: FakeTelegramServer, dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    provider = ScriptedProvider(replies=["ok"])
    group = -100
    async with serving_both(telegram, dingtalk, tmp_path, database_url, provider) as (tg, _):
        message = telegram.user_message("/link", chat_id=group, chat_type="group")
        telegram.push_update(TOKEN, message)
        said = (await tg.sent(1, chat_id=group))[-1].text
        links = await tg.client.get("/api/admin/tenants/default/links")
    assert said == "Linking works in a private chat with me."
    assert links.json()["identities"] == []


async def test_guessing_codes_from_a_chat_is_stopped_and_the_user_told(
    telegram: FakeTelegramServer, dingtalk: FakeDingTalkServer, tmp_path: Path, database_url: str
) -> None:
    """Ten codes per chat in ten minutes, good ones counted too; then the chat is told to wait,
    even for a real code, while another chat still links."""
    provider = ScriptedProvider(replies=["ok"])
    async with serving_both(telegram, dingtalk, tmp_path, database_url, provider) as (tg, dt):
        code = code_in(await on_telegram(tg, "/link"))
        guesses = [await on_dingtalk(dt, f"/link AAAA-{n:04d}") for n in range(LINK_ATTEMPTS)]
        refused = await on_dingtalk(dt, f"/link {code}")
        elsewhere = await on_dingtalk(dt, f"/link {code}", staff="staff-bob")
    assert all("That did not work" in said and "does not exist" in said for said in guesses)
    assert "too many link codes were tried from here" in refused
    assert "try again in 10 minutes" in refused
    assert "share one memory" in elsewhere


async def test_ada_links_her_qq_account_and_a_fact_told_on_telegram_reaches_it(
    telegram: FakeTelegramServer, qq: FakeQQServer, tmp_path: Path, database_url: str
) -> None:
    """QQ's private chats key memory by `qq:<user openid>`; a group chat does not link."""
    settings = make_settings(
        database_url,
        tmp_path,
        channels={"tg": bot_settings(telegram), "qb": qq_settings(qq)},
        memory={"path": str(tmp_path / "MEMORY.md"), "scope": "user"},
    )
    remember = ToolCall(id="w", name="memory_write", arguments={"fact": "Ada is allergic to kiwi"})
    provider = ScriptedProvider(replies=["ok"])
    app = create_app(settings, provider=provider)
    async with serve(app) as client:
        tg = Served(app, client, telegram, provider)
        on_qq = ServedQQ(app, client, qq, provider)

        async def said_on_qq(text: str, **where: str) -> str:
            before = len(qq.sent())
            event = qq.group_message(text, **where) if where else qq.private_message(text)
            assert (await on_qq.deliver(event)).status_code == 200
            return (await on_qq.sent(before + 1))[-1].text

        asked = await on_telegram(tg, "/link")
        in_group = await said_on_qq(f"/link {code_in(asked)}", group="group-1", member="user-1")
        linked = await said_on_qq(f"/link {code_in(asked)}")
        provider.push(ScriptedToolCalls([remember]), "Noted.")
        await on_telegram(tg, "remember: I am allergic to kiwi")
        await said_on_qq("what fruit should I avoid?")
        on_qq_prompt = prompt_text(provider.requests[-1])
        for command in ("/new", "/stop", "/summary", "/memory"):
            assert await said_on_qq(command)
        person = await client.get("/api/people/links", params={"user": "qq:user-1"})
    assert in_group == "Linking works in a private chat with me."
    assert "share one memory" in linked
    assert "Ada is allergic to kiwi" in on_qq_prompt
    assert sorted(person.json()["identities"]) == sorted(["qq:user-1", f"telegram:{ADA_TELEGRAM}"])


# ---- Discord ----------------------------------------------------------------------------------


async def test_a_fact_told_on_telegram_reaches_the_linked_person_on_discord(
    telegram: FakeTelegramServer, discord_fake: FakeDiscordServer, tmp_path: Path, database_url: str
) -> None:
    remember = ToolCall(id="w", name="memory_write", arguments={"fact": "Ada is allergic to kiwi"})
    provider = ScriptedProvider(replies=["ok"])
    settings = make_settings(
        database_url,
        tmp_path,
        channels={"tg": bot_settings(telegram), "dc": discord_settings(discord_fake)},
        memory={"path": str(tmp_path / "MEMORY.md"), "scope": "user"},
    )
    app = create_app(settings, provider=provider)
    async with serve(app) as client:
        await asyncio.to_thread(discord_fake.wait_connected, DISCORD_TOKEN)
        tg = Served(app, client, telegram, provider)
        dc = ServedDiscord(app, client, discord_fake, provider)

        async def on_discord(text: str, user: str) -> str:
            before = len(discord_fake.sent(channel_id=f"3{user}"))
            await dc.deliver(dc.message(text, author_id=user, channel_id=f"3{user}"))
            return (await dc.sent(before + 1, channel_id=f"3{user}"))[-1].content

        asked = await on_telegram(tg, "/link")
        linked = await on_discord(f"/link {code_in(asked)}", "501")
        provider.push(ScriptedToolCalls([remember]), "Noted.")
        await on_telegram(tg, "remember: I am allergic to kiwi")
        await on_discord("what fruit should I avoid?", "501")
        adas = prompt_text(provider.requests[-1])
        await on_discord("and me?", "502")
        bobs = prompt_text(provider.requests[-1])
        person = await client.get("/api/people/links", params={"user": "discord:501"})
    assert "share one memory" in linked
    assert sorted(person.json()["identities"]) == ["discord:501", f"telegram:{ADA_TELEGRAM}"]
    assert "Ada is allergic to kiwi" in adas and "kiwi" not in bobs


async def on_slack(served: ServedSlack, text: str, *, user: str = "U0ADA") -> str:
    """`text` from `user` in their direct message with the bot; its answer."""
    before = len(served.slack.sent())
    await served.acked(await served.push(served.slack.event(text, user=user, channel=f"D{user}")))
    return (await served.sent(before + 1))[-1].text


async def test_a_fact_told_on_slack_reaches_the_linked_person_on_the_web(
    slack: FakeSlackServer, tmp_path: Path, database_url: str
) -> None:
    remember = ToolCall(id="w", name="memory_write", arguments={"fact": "Ada is allergic to kiwi"})
    provider = ScriptedProvider(replies=["ok"])
    memory = {"path": str(tmp_path / "MEMORY.md"), "scope": "user"}
    async with serving_slack(
        slack, tmp_path, database_url, provider=provider, memory=memory
    ) as served:
        web_code = await served.client.post("/api/people/link-codes", json={"user": ADA_WEB})
        assert web_code.status_code == 201, web_code.text
        linked = await on_slack(served, f" /link {web_code.json()['code']}")
        person = await served.client.get("/api/people/links", params={"user": ADA_WEB})
        provider.push(ScriptedToolCalls([remember]), "Noted.")
        await on_slack(served, "remember: I am allergic to kiwi")
        sent = {"message": "what fruit should I avoid?", "user": ADA_WEB}
        web = await served.client.post("/api/chat/send", json=sent)
        on_web = prompt_text(provider.requests[-1])
        await on_slack(served, "what fruit should I avoid?", user="U0BOB")
        bobs = prompt_text(provider.requests[-1])
    assert "share one memory" in linked
    assert sorted(person.json()["identities"]) == sorted([ADA_WEB, "slack:U0ADA"])
    assert web.status_code == 200 and "Ada is allergic to kiwi" in on_web
    assert "kiwi" not in bobs


async def test_a_fact_told_on_telegram_reaches_the_linked_person_on_wecom(
    telegram: FakeTelegramServer, wecom: FakeWeComServer, tmp_path: Path, database_url: str
) -> None:
    """A WeCom app's private chats are people (`wecom:<user id>`): they link like any other."""
    remember = ToolCall(id="w", name="memory_write", arguments={"fact": "Ada is allergic to kiwi"})
    provider = ScriptedProvider(replies=["ok"])
    settings = make_settings(
        database_url,
        tmp_path,
        channels={"tg": bot_settings(telegram), "wc": wecom_app_settings(wecom)},
        memory={"path": str(tmp_path / "MEMORY.md"), "scope": "user"},
    )
    app = create_app(settings, provider=provider)
    async with serve(app) as client:
        tg = Served(app, client, telegram, provider)
        wc = ServedApp(app, client, wecom, provider)

        async def on_wecom(text: str, user: str = "ada") -> str:
            before = len(wecom.sent(user))
            await wc.post(wc.message(text, user=user))
            return (await wc.sent(before + 1, to_user=user))[-1].content

        asked = await on_telegram(tg, "/link")
        linked = await on_wecom(f"/link {code_in(asked)}")
        person = await client.get("/api/people/links", params={"user": "wecom:ada"})
        provider.push(ScriptedToolCalls([remember]), "Noted.")
        await on_telegram(tg, "remember: I am allergic to kiwi")
        await on_wecom("what fruit should I avoid?")
        on_wc = prompt_text(provider.requests[-1])
        await on_wecom("and me?", user="bob")
        bobs = prompt_text(provider.requests[-1])
    assert "share one memory" in linked
    assert sorted(person.json()["identities"]) == sorted(["wecom:ada", f"telegram:{ADA_TELEGRAM}"])
    assert "Ada is allergic to kiwi" in on_wc and "kiwi" not in bobs


async def test_a_fact_told_on_feishu_reaches_the_linked_person_on_telegram(
    telegram: FakeTelegramServer, feishu: FakeFeishuServer, tmp_path: Path, database_url: str
) -> None:
    remember = ToolCall(id="w", name="memory_write", arguments={"fact": "Ada is allergic to kiwi"})
    provider = ScriptedProvider(replies=["ok"])
    settings = make_settings(
        database_url,
        tmp_path,
        channels={"tg": bot_settings(telegram), "fs": feishu_settings(feishu)},
        memory={"path": str(tmp_path / "MEMORY.md"), "scope": "user"},
    )
    app = create_app(settings, provider=provider)
    async with serve(app) as client:
        await asyncio.to_thread(feishu.wait_connected, FEISHU_APP)
        tg = Served(app, client, telegram, provider)
        fs = ServedFeishu(app, client, feishu, provider)

        async def on_feishu(text: str, sender: str = "ou_ada") -> str:
            before = len(feishu.sent())
            await fs.push(fs.message(text, chat_id=f"oc_{sender}", sender=sender))
            return (await fs.sent(before + 1))[-1].text

        asked = await on_feishu("/link")
        linked = await on_telegram(tg, f"/link {code_in(asked)}")
        provider.push(ScriptedToolCalls([remember]), "Noted.")
        await on_feishu("remember: I am allergic to kiwi")
        await on_telegram(tg, "what fruit should I avoid?")
        on_tg = prompt_text(provider.requests[-1])
        await on_feishu("and me?", sender="ou_bob")
        bobs = prompt_text(provider.requests[-1])
        person = await client.get("/api/people/links", params={"user": "feishu:ou_ada"})
    assert "share one memory" in linked
    assert sorted(person.json()["identities"]) == ["feishu:ou_ada", f"telegram:{ADA_TELEGRAM}"]
    assert "Ada is allergic to kiwi" in on_tg and "kiwi" not in bobs
