"""`tally eval memory`, run as a user would (in process, so the fake vendor server's requests
can be read): the table prints, recall is measured on what the model received, corrections
leave stale values behind, and the operator's database and memory are never touched."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from pathlib import Path

import pytest

from backend.cli.main import main
from backend.evals.memory_facts import build_script
from tests.conftest import ROOT
from tests.fakes.openai_server import FakeOpenAIServer

FAKE_KEY_ENV = "TALLY_EVAL_FAKE_KEY"
SUMMARIZER_SYSTEM = "You distill conversations into durable memory."


def write_config(tmp_path: Path, extra: str = "") -> Path:
    """An operator's config: a database file and a MEMORY.md that already hold data."""
    database = tmp_path / "operator.db"
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE kept (note TEXT)")
        conn.execute("INSERT INTO kept VALUES ('the operator''s data')")
    (tmp_path / "MEMORY.md").write_text("2026-01-02|manual|The operator likes tea\n")
    path = tmp_path / "config.yaml"
    path.write_text(
        f'database: {{url: "sqlite+aiosqlite:///{database}"}}\n'
        f"prompts_dir: {ROOT / 'prompts'}\n"
        f"memory: {{path: {tmp_path / 'MEMORY.md'}, overflow_batch: 4}}\n" + extra,
        encoding="utf-8",
    )
    return path


def run_eval(config: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(["--config", str(config), "eval", "memory", *args])
    printed = capsys.readouterr().out
    assert code == 0, printed
    return printed


def rows(printed: str) -> dict[str, list[str]]:
    """The cells of each table row after its label."""
    table: dict[str, list[str]] = {}
    for line in printed.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            label, *cells = [cell.strip() for cell in line.strip("|").split("|")]
            table[label] = cells
    return table


def share(cell: str) -> float:
    """The percentage of a `61.5% (123)` cell."""
    match = re.fullmatch(r"([\d.]+)% \((\d+)\)", cell)
    assert match is not None, cell
    return float(match[1])


def count(cell: str) -> int:
    match = re.fullmatch(r"[\d.]+% \((\d+)\)", cell)
    assert match is not None, cell
    return int(match[1])


def fake_vendor_config(tmp_path: Path, server: FakeOpenAIServer) -> Path:
    return write_config(
        tmp_path,
        "providers:\n"
        f'  fake: {{kind: openai_compatible, base_url: "{server.base_url}",'
        f" api_key_env: {FAKE_KEY_ENV}}}\n"
        "model: {provider: fake, name: fake-model}\n"
        "persona: {max_history_messages: 10}\n",
    )


def test_the_report_prints_recall_for_every_kind_of_fact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = run_eval(write_config(tmp_path), capsys, "--facts", "24", "--summarizer", "builtin")
    table = rows(printed)
    assert "24 facts, window 50 messages" in printed
    assert "only long-term memory can answer" in printed
    for label in ("all", "name", "email", "phone", "quantity", "date", "preference"):
        assert len(table[label]) == 3, label
        assert all(0 <= share(cell) <= 100 for cell in table[label][1:]), label
    assert table["all"][0] == "24"
    assert "stale: the old value of a corrected fact" in table
    for label in ("summarizer calls (conversation)", "summarizer tokens (conversation)"):
        assert int(table[label][0].split()[0].replace(",", "")) > 0
    told = build_script(24)
    assert table["turns"][0].startswith(f"{len(told.messages)}, then {24 + len(told.controls)} ")
    assert table["window"][0] == "50 messages, overflow batch 4"
    assert table["failed turns"] == ["0"]


def test_with_a_window_larger_than_the_conversation_every_fact_is_recalled_in_its_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = run_eval(
        write_config(tmp_path),
        capsys,
        "--facts",
        "20",
        "--window",
        "1000",
        "--summarizer",
        "builtin",
    )
    table = rows(printed)
    assert table["all"][2] == "100.0% (20)"
    # The old values are still in the window too: every correction leaves one behind.
    corrected = int(table["stale: the old value of a corrected fact"][0])
    assert corrected >= 3
    assert table["stale: the old value of a corrected fact"][2] == f"100.0% ({corrected})"


def test_with_a_small_window_the_builtin_summarizer_recalls_most_facts_in_a_fresh_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = run_eval(
        write_config(tmp_path),
        capsys,
        "--facts",
        "40",
        "--window",
        "10",
        "--summarizer",
        "builtin",
    )
    table = rows(printed)
    assert share(table["all"][1]) >= 75.0  # measured 95.0%: what left the window came back
    assert table["never stated (control)"][1:] == ["0.0% (0)", "0.0% (0)"]


def test_a_fact_never_stated_is_never_counted_as_recalled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = run_eval(
        write_config(tmp_path),
        capsys,
        "--facts",
        "30",
        "--window",
        "1000",
        "--summarizer",
        "builtin",
    )
    controls = rows(printed)["never stated (control)"]
    assert controls[0] == "3"
    assert controls[1:] == ["0.0% (0)", "0.0% (0)"]  # while every fact told is in the window


def test_the_configured_summarizer_is_the_vendor_over_http_and_leaves_stale_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAKE_KEY_ENV, "fake-key")
    with FakeOpenAIServer() as server:
        # No --summarizer: with the model's key set, the configured one is the default.
        printed = run_eval(fake_vendor_config(tmp_path, server), capsys, "--facts", "30")
        requests = server.requests
    table = rows(printed)
    assert "Summarizer: fake fake-model (the chat model" in printed
    # Only the summarizer reached the vendor: the chat model is the recording stand-in.
    assert requests and all(
        r.body["messages"][0]["content"].startswith(SUMMARIZER_SYSTEM) for r in requests
    )
    calls = int(table["summarizer calls (conversation)"][0])
    assert 0 < calls <= len(requests)
    assert int(table["summarizer tokens (conversation)"][0].replace(",", "")) > 0
    # The fake answers `ok: <the prompt's first words>`: the fidelity gate keeps the emails,
    # phone numbers and quantities verbatim, and no preference ("my favourite tea is …" holds
    # no identifier); the archived turns bring the preferences back all the same.
    assert count(table["email"][1]) > 0 and count(table["quantity"][1]) > 0
    assert count(table["preference"][1]) > 0
    # Nothing supersedes those lines: a corrected email or number keeps its old value there.
    assert count(table["stale: the old value of a corrected fact"][1]) > 0
    assert table["never stated (control)"][1:] == ["0.0% (0)", "0.0% (0)"]


def test_it_never_touches_the_configs_database_or_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path)
    database, memory = tmp_path / "operator.db", tmp_path / "MEMORY.md"

    def state() -> list[tuple[str, str, int]]:
        files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
        return [
            (p.name, hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in files
        ]

    before = state()
    run_eval(config, capsys, "--facts", "12", "--window", "6", "--summarizer", "builtin")
    assert state() == before
    assert {p.name for p in tmp_path.iterdir()} == {"operator.db", "config.yaml", "MEMORY.md"}
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT note FROM kept").fetchall() == [("the operator's data",)]
    assert memory.read_text() == "2026-01-02|manual|The operator likes tea\n"


@pytest.mark.parametrize(
    "args",
    [
        ["--window", "0"],
        ["--window", "ten"],
        ["--facts", "0"],
        ["--summarizer", "smart"],
        ["quality"],
    ],
)
def test_bad_arguments_exit_2(tmp_path: Path, args: list[str]) -> None:
    suite = [] if args == ["quality"] else ["memory"]
    with pytest.raises(SystemExit) as exited:
        main(["--config", str(write_config(tmp_path)), "eval", *suite, *args])
    assert exited.value.code == 2


def test_too_many_facts_or_a_configured_summarizer_without_a_key_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(write_config(tmp_path))
    assert main(["--config", config, "eval", "memory", "--facts", "100000"]) == 2
    assert "--facts must be 1 to" in capsys.readouterr().err
    keyless = tmp_path / "keyless"
    keyless.mkdir()
    openai = (
        "providers: {openai: {kind: openai_compatible, api_key_env: OPENAI_API_KEY}}\n"
        "model: {provider: openai, name: gpt-4o-mini}\n"
    )  # OPENAI_API_KEY is unset in tests
    extra = write_config(keyless, openai)
    assert main(["--config", str(extra), "eval", "memory", "--summarizer", "configured"]) == 2
    assert "no model that can answer" in capsys.readouterr().err


@pytest.mark.slow
def test_the_default_run_tells_200_facts_and_recalls_most_of_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = run_eval(write_config(tmp_path), capsys, "--summarizer", "builtin")
    table = rows(printed)
    assert table["all"][0] == "200"
    corrected = int(table["corrected (new value)"][0])
    assert corrected >= 20  # at least 10% of the facts are corrected later
    assert share(table["all"][1]) >= 75.0  # measured 94.5% at window 50
    assert table["never stated (control)"][1:] == ["0.0% (0)", "0.0% (0)"]
    assert table["failed turns"] == ["0"]


@pytest.mark.slow
@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_long_eval_finds_what_months_of_sessions_said_and_no_corrected_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], language: str
) -> None:
    printed = run_eval(
        write_config(tmp_path), capsys, "--long", "--language", language, "--summarizer", "builtin"
    )
    table = rows(printed)

    assert "24 sessions over 205 days, 39 questions" in printed
    kinds = ["single", "paraphrase", "two-fact", "when", "corrected"]
    assert all(table[kind][0] for kind in kinds)  # every kind asked, with its count
    tally, all_memory, recency = (
        share(table["all"][1]),
        share(table["all"][4]),
        share(table["all"][7]),
    )
    # The archive and the ranking find what the rule-based summarizer never kept.
    assert tally > all_memory >= recency
    assert share(table["when"][1]) == 100.0  # lines carry the day their words were said
    assert share(table["stale: the old value came back"][1]) == 0.0
    assert int(table["summarizer calls"][0]) > 0


def test_language_applies_to_the_long_eval_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--config", str(write_config(tmp_path)), "eval", "memory", "--language", "zh"])
    assert code == 2
    assert "--language applies to --long" in capsys.readouterr().err
