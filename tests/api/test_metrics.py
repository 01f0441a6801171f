"""Observability: /metrics shows per-tenant turns and tokens; logs carry ids, never text."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from backend.app import create_app
from backend.cli.logs import KeyValueFormatter
from backend.errors import ProviderUnavailable
from backend.providers.scripted import ScriptedProvider
from tests.api.test_auth import ADMIN_KEY, bearer, make_tenant
from tests.conftest import make_settings, serve

SECRET_TEXT = "my bank password is hunter2"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def test_metrics_show_turns_and_tokens_per_tenant(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    provider = ScriptedProvider(replies=["fine thanks"])
    settings = make_settings(database_url, tmp_path, auth={"mode": "keys"})
    async with serve(create_app(settings, provider=provider)) as client:
        acme = (await make_tenant(client, "metrics-acme"))["key"]
        globex = (await make_tenant(client, "metrics-globex"))["key"]
        before = samples((await client.get("/metrics", headers=bearer(ADMIN_KEY))).text)
        for _ in range(3):
            await client.post("/api/chat/send", json={"message": "hi"}, headers=bearer(acme))
        await client.post("/api/chat/send", json={"message": "hi"}, headers=bearer(globex))
        provider.push(ProviderUnavailable("scripted", "down"))
        with caplog.at_level(logging.WARNING):
            failed = await client.post(
                "/api/chat/send", json={"message": SECRET_TEXT}, headers=bearer(globex)
            )
        scraped = await client.get("/metrics", headers=bearer(ADMIN_KEY))
        tenant_scrape = await client.get("/metrics", headers=bearer(acme))
    after = samples(scraped.text)

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    assert delta("tally_turns_total", tenant="metrics-acme", outcome="completed") == 3
    assert delta("tally_turns_total", tenant="metrics-globex", outcome="completed") == 1
    assert delta("tally_turns_total", tenant="metrics-globex", outcome="failed") == 1
    assert delta("tally_tokens_total", tenant="metrics-acme", kind="completion") == 6
    assert delta("tally_tokens_total", tenant="metrics-acme", kind="prompt") > 0
    assert (
        delta("tally_provider_failures_total", tenant="metrics-globex", code="provider_unavailable")
        == 1
    )
    assert delta("tally_turn_seconds_count", tenant="metrics-acme") == 3
    assert after[("tally_prompt_build_seconds_count", ())] >= 4
    assert tenant_scrape.status_code == 403  # a tenant key sees no one else's figures
    assert failed.status_code == 503
    (record,) = [r for r in caplog.records if r.getMessage().startswith("turn failed:")]
    line = KeyValueFormatter("%(message)s").format(record)
    assert "tenant=metrics-globex" in line and "session=" in line and "turn=turn_" in line
    assert "outcome=failed code=provider_unavailable" in line
    assert all(SECRET_TEXT not in r.getMessage() for r in caplog.records)
