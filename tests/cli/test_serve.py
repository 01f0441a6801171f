"""`tally serve`: what it refuses before serving, and how it says so."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.cli.runner import config, tally
from tests.cli.terminal import CTRL_C, Terminal
from tests.cli.test_doctor import BROKEN, OPENAI
from tests.conftest import ROOT, VENDOR_ENV
from tests.crash import START_TIMEOUT_S
from tests.waiting import until_blocking

pytestmark = pytest.mark.process

OPENAI_MODEL = OPENAI + "model: {provider: openai, name: gpt-4o-mini}\n"


FIVE_MISTAKES = (
    "providers:\n"
    "  openai: {kind: openai_compatible, api_key_env: OPENAI_API_KEY, api_key: sk-oops}\n"
    "model: {provider: openai, name: gpt-4o-mini}\n"
    "persona: {nmae: Ada, system_template: mine.md.j2}\n"
    "tools: {enabled: [memory_search, web_search]}\n"
    "tenants: {acme: {model: {provider: azure, name: gpt-4o}}}\n"
)
# One a layer: the schema (two), a tenant's model, a tool, a template.
REPORTED = [
    "providers.openai.api_key: unknown key; secrets never go in the file",
    "persona.nmae: unknown key (did you mean name?)",
    "tenants.acme.model.provider: provider 'azure' is not defined under providers:",
    "tools.enabled.1: unknown tool 'web_search'",
    "persona.system_template: 'mine.md.j2' is not in the prompts folder",
]


@pytest.mark.parametrize("command", [("serve", "--port", "0"), ("doctor", "--offline")])
def test_five_mistakes_are_reported_together_in_one_run(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        f'database: {{url: "sqlite+aiosqlite:///{tmp_path}/t.db"}}\n'
        f"prompts_dir: {ROOT / 'prompts'}\n" + FIVE_MISTAKES,
        encoding="utf-8",
    )
    result = tally("--config", str(path), *command)

    said = result.stdout + result.stderr
    assert result.returncode == (2 if command[0] == "serve" else 1)
    lines = said.splitlines()
    found = [next(i for i, line in enumerate(lines) if problem in line) for problem in REPORTED]
    assert found == sorted(found)  # each once, the file's values first
    assert sum("invalid configuration" in line for line in lines) == 1
    assert "serving on" not in said and "Traceback" not in said


def test_serve_refuses_a_public_host_without_keys(tmp_path: Path) -> None:
    result = tally("--config", str(config(tmp_path)), "serve", "--host", "0.0.0.0")
    assert result.returncode == 2
    assert "refusing to listen on 0.0.0.0" in result.stderr


@pytest.mark.parametrize(("extra", "problem"), BROKEN)
def test_a_config_error_stops_start_up_before_serving(
    tmp_path: Path, extra: str, problem: str
) -> None:
    path = config(tmp_path, extra)
    result = tally("--config", str(path), "serve", "--port", "0")
    assert result.returncode == 2
    assert f"{path}: invalid configuration" in result.stderr and problem in result.stderr
    assert "serving on" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("extra", "arguments"),
    [
        ("auth: {mode: keys}\n", ()),
        ("", ("--host", "0.0.0.0", "--insecure-public")),
    ],
)
def test_without_a_key_serving_beyond_the_local_demo_is_refused_naming_the_variable(
    tmp_path: Path, extra: str, arguments: tuple[str, ...]
) -> None:
    path = config(tmp_path, OPENAI_MODEL + extra)
    result = tally("--config", str(path), "serve", "--port", "0", *arguments)
    assert result.returncode == 2
    assert "model.provider: no LLM provider key is configured; set OPENAI_API_KEY" in result.stderr
    assert "serving on" not in result.stderr


class Serving:
    """`tally serve` in a subprocess, its log (stderr) in a file read as it grows."""

    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.log = tmp_path / "serve.log"
        environment = {k: v for k, v in os.environ.items() if k not in VENDOR_ENV}
        with self.log.open("w", encoding="utf-8") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "backend", *args],
                cwd=ROOT,
                env=environment | (env or {}),
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    @property
    def text(self) -> str:
        return self.log.read_text(encoding="utf-8")

    def wait_for(self, pattern: str) -> re.Match[str]:
        return until_blocking(
            lambda: self._logged(pattern),
            lambda: f"{pattern!r} logged:\n{self.text}",
            timeout_s=START_TIMEOUT_S,
            poll_s=0.05,
        )

    def _logged(self, pattern: str) -> re.Match[str] | None:
        """The pattern found in the log; an error once tally has exited without it."""
        found = re.search(pattern, self.text)
        assert found or self.process.poll() is None, f"tally exited:\n{self.text}"
        return found

    def stop(self) -> str:
        """SIGTERM, as a service manager stops it; the whole log."""
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(60)
        return self.text


TEXT_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING|ERROR) \S+: ")


def test_serving_on_is_said_once_the_server_answers(tmp_path: Path) -> None:
    serving = Serving(tmp_path, "--config", str(config(tmp_path)), "serve", "--port", "0")
    try:
        port = serving.wait_for(r"serving on http://127\.0\.0\.1:(\d+)").group(1)
        answered = httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=30)  # no retry
    finally:
        log = serving.stop()
    assert answered.status_code == 200
    assert all(TEXT_LINE.match(line) for line in log.splitlines()), log
    assert "Uvicorn running" not in log and "uvicorn.error" not in log


def test_a_port_in_use_names_the_port_and_the_way_out(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = tally("--config", str(config(tmp_path)), "serve", "--port", str(port))
    assert result.returncode == 2
    assert f"port {port} is in use on 127.0.0.1" in result.stderr
    assert "--port" in result.stderr and "make run PORT=" in result.stderr
    assert "Errno" not in result.stderr and "Traceback" not in result.stderr
    assert "checking" not in result.stderr  # said at once, before the slower checks


def test_json_log_lines_tell_each_turn_and_summary_and_never_what_was_said(
    tmp_path: Path,
) -> None:
    path = config(tmp_path, "logging: {format: json}\n")
    serving = Serving(tmp_path, "--config", str(path), "serve", "--port", "0")
    said = [f"My locker code is {n}4{n}7 and I like plum number {n}." for n in range(6)]
    try:
        port = serving.wait_for(r"serving on http://127\.0\.0\.1:(\d+)").group(1)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            session_id = client.post("/api/chat/sessions", json={}).json()["id"]
            replies = [
                client.post("/api/chat/send", json={"session_id": session_id, "message": text})
                for text in said
            ]
        serving.wait_for("summary job done")
    finally:
        log = serving.stop()
    lines = [json.loads(line) for line in log.splitlines()]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    turns = [line for line in lines if line["message"] == "turn completed"]
    assert len(turns) == len(said)
    for turn in turns:
        assert turn["level"] == "INFO" and turn["tenant"] == "default"
        assert turn["session"] == session_id and turn["channel"] == "api"
        assert turn["outcome"] == "completed" and turn["completion_tokens"] > 0
        assert isinstance(turn["duration_ms"], int)
    (job,) = [line for line in lines if line["message"] == "summary job done"]
    assert job["session"] == session_id and job["kind"] == "overflow"
    for text in [*said, *(r.json()["reply"] for r in replies)]:
        assert text not in log
    assert "locker" not in log and "plum" not in log  # nor a piece of what was said


def test_a_provider_failure_is_logged_with_the_provider_its_url_and_the_cause(
    tmp_path: Path, refused_port: int
) -> None:
    dead = refused_port
    vendor = (
        f"providers: {{acme: {{kind: openai_compatible, base_url: 'http://127.0.0.1:{dead}/v1',"
        " api_key_env: ACME_KEY, max_retries: 1, max_retry_wait_s: 0.1}}\n"
        "model: {provider: acme, name: m}\n"
    )
    serving = Serving(
        tmp_path,
        *("--config", str(config(tmp_path, vendor)), "serve", "--port", "0"),
        env={"ACME_KEY": "sk-test"},
    )
    try:
        port = serving.wait_for(r"serving on http://127\.0\.0\.1:(\d+)").group(1)
        answer = httpx.post(
            f"http://127.0.0.1:{port}/api/chat/send", json={"message": "hi"}, timeout=60
        )
        failed = serving.wait_for(r"WARNING tally\.turns: turn failed: (.*)")
    finally:
        log = serving.stop()
    cause = f"acme (http://127.0.0.1:{dead}/v1): connection refused"
    assert answer.status_code == 503 and cause in failed.group(1)
    assert "outcome=failed code=provider_unavailable" in failed.group(1)
    assert re.search(rf"provider call failed \({re.escape(cause)}\); retry 1 in", log), log
    assert "sk-test" not in log


def test_in_a_terminal_serve_says_what_it_does_and_ctrl_c_stops_it(tmp_path: Path) -> None:
    with Terminal("--config", str(config(tmp_path)), "serve", "--port", "0") as terminal:
        terminal.expect("INFO tally: checking .*: every tenant's model, tools and templates")
        screen = terminal.expect(r"INFO tally: serving on http://127\.0\.0\.1:\d+ \(database")
        port = re.findall(r"serving on http://127\.0\.0\.1:(\d+)", screen)[-1]
        answered = httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=30)
        terminal.send(CTRL_C)
        assert terminal.wait_exit() == 130  # as a program stopped by Ctrl-C exits
    assert answered.status_code == 200
    assert "Application shutdown complete" in terminal.screen  # a clean stop
    assert "Traceback" not in terminal.screen and "Uvicorn running" not in terminal.screen
