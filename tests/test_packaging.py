"""The wheel alone is Tally: built once from the checkout and installed into a fresh venv, it
brings the code, the page, the prompts and the commented config.yaml, and serves and chats from
an empty directory with no config file; `tally init` there, then `serve` with that config, too.

The fresh venv takes its third-party packages from the dev venv through a `.pth` that names the
dev venv's site-packages as a plain path: `.pth` files found there are not processed, so the
editable install of the checkout stays out and `backend` can come from the wheel only. Every
command runs outside the checkout, with PYTHONPATH unset.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT, VENDOR_ENV
from tests.waiting import until_blocking

pytestmark = pytest.mark.process

START_DEADLINE_S = 120.0  # a busy 2-core machine imports FastAPI and both SDKs slowly
COMMAND_TIMEOUT_S = 300.0


def run(command: list[str | Path], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        cwd=cwd,
        env=outside_environment(),
    )
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result


def outside_environment() -> dict[str, str]:
    """The environment of a user who installed the wheel: no PYTHONPATH, no config, no keys."""
    dropped = {"PYTHONPATH", "PYTHONHOME", "TALLY_CONFIG", "VIRTUAL_ENV", *VENDOR_ENV}
    return {name: value for name, value in os.environ.items() if name not in dropped}


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once per test session, offline, with the dev venv's build backend."""
    if importlib.util.find_spec("hatchling") is None:
        pytest.skip(
            "cannot build the wheel offline: the build backend hatchling (a dev extra) is not "
            "installed in this venv; `make test` installs it"
        )
    out = tmp_path_factory.mktemp("wheel")
    command: list[str | Path] = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
    command += ["--no-build-isolation", "--no-index", "--wheel-dir", out, ROOT]
    before = checkout_state()
    run(command, cwd=out)
    assert checkout_state() == before, "building the wheel wrote into the checkout"
    [built] = out.glob("tally-*.whl")
    return built


def checkout_state() -> str | None:
    """`git status` of the checkout, ignored files included (None outside a git checkout)."""
    try:
        status = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--ignored"],
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
        )
    except FileNotFoundError:
        return None
    return status.stdout if status.returncode == 0 else None


@dataclass(frozen=True)
class Installed:
    python: Path
    tally: Path
    site_packages: Path


@pytest.fixture(scope="session")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    venv = tmp_path_factory.mktemp("venv") / "tally"
    run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=venv.parent)
    python = venv / "bin" / "python"
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site_packages = Path(run([python, "-c", purelib], cwd=venv).stdout.strip())
    dev_paths = {sysconfig.get_paths()[name] for name in ("purelib", "platlib")}
    (site_packages / "_dev_dependencies.pth").write_text(
        "\n".join(sorted(dev_paths)) + "\n", encoding="utf-8"
    )
    command: list[str | Path] = [sys.executable, "-m", "pip", "--python", python, "install"]
    command += ["--quiet", "--no-deps", "--no-index", wheel]
    run(command, cwd=venv)
    return Installed(python=python, tally=venv / "bin" / "tally", site_packages=site_packages)


def test_the_wheel_carries_the_code_the_page_the_prompts_and_the_config(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        config = archive.read("backend/bundled/config.yaml")
        entry_points = archive.read("tally-0.1.0.dist-info/entry_points.txt").decode()
    code = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "backend").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert code <= names, sorted(code - names)
    for folder in ("frontend", "prompts"):
        shipped = {
            f"backend/bundled/{path.relative_to(ROOT).as_posix()}"
            for path in (ROOT / folder).rglob("*")
            if path.is_file()
        }
        assert shipped and shipped <= names, sorted(shipped - names)
    assert config == (ROOT / "config.yaml").read_bytes()
    assert "tally = backend.cli.main:main" in entry_points
    assert not [name for name in names if not name.startswith(("backend/", "tally-0.1.0."))]
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]


def test_the_installed_wheel_runs_from_its_own_venv(installed: Installed, tmp_path: Path) -> None:
    probe = (
        "import json, sys, backend\n"
        "from backend.host.shipped_files import example_config, frontend_dir, prompts_dir\n"
        "print(json.dumps({'backend': backend.__file__, 'path': sys.path,\n"
        "    'bundled': [str(example_config()), str(frontend_dir()), str(prompts_dir())]}))\n"
    )
    found = json.loads(run([installed.python, "-c", probe], cwd=tmp_path).stdout)
    assert Path(found["backend"]).is_relative_to(installed.site_packages)
    for path in found["bundled"]:
        assert Path(path).is_relative_to(installed.site_packages / "backend" / "bundled")
        assert Path(path).exists()
    assert str(ROOT) not in found["path"]


def test_the_installed_wheel_serves_the_page_and_chats_without_a_config(
    installed: Installed, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    log = tmp_path / "serve.log"
    with serving(installed, "serve", cwd=empty, log=log) as client:
        assert client.get("/api/health").json()["is_demo"] is True
        page = client.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        [script] = re.findall(r'<script type="module" src="([^"]+)"', page.text)
        module = client.get(f"/{script}")
        assert module.status_code == 200
        assert "javascript" in module.headers["content-type"]
        assert "import " in module.text
        assert_chats(client)
    assert (empty / "data" / "tally.db").is_file()
    assert "running on built-in defaults" in log.read_text(encoding="utf-8")


def test_the_installed_wheel_inits_a_directory_then_serves_with_its_config(
    installed: Installed, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    wrote = run([installed.tally, "init"], cwd=home).stdout
    assert "wrote config.yaml" in wrote and wrote.rstrip().endswith("tally serve")
    assert (home / "prompts" / "system.md.j2").is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = home / "config.yaml"
    probe = f"from backend.settings import load_settings; print(load_settings({str(config)!r}))"
    resolved = run([installed.python, "-c", probe], cwd=home).stdout
    assert f"prompts_dir='{home / 'prompts'}'" in resolved
    log = tmp_path / "serve.log"
    with serving(installed, "--config", str(config), "serve", cwd=elsewhere, log=log) as client:
        assert_chats(client)
    assert (home / "data" / "tally.db").is_file()
    assert not list(elsewhere.iterdir())
    assert "built-in defaults" not in log.read_text(encoding="utf-8")


def assert_chats(client: httpx.Client) -> None:
    """One turn through the API the page uses."""
    sent = client.post("/api/chat/send", json={"message": "hello from the wheel"})
    assert sent.status_code == 200, sent.text
    assert sent.json()["reply"].strip()
    session = client.get(f"/api/chat/sessions/{sent.json()['session_id']}/messages").json()
    assert [message["role"] for message in session["messages"]] == ["user", "assistant"]


@contextmanager
def serving(installed: Installed, *args: str, cwd: Path, log: Path) -> Iterator[httpx.Client]:
    """`tally ARGS --port P` until it answers /api/health; always stopped after."""
    port = free_port()
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            [str(installed.tally), *args, "--port", str(port)],
            cwd=cwd,
            env=outside_environment(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            wait_until_healthy(process, client, log)
            yield client
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)


def wait_until_healthy(process: subprocess.Popen[bytes], client: httpx.Client, log: Path) -> None:
    def healthy() -> bool:
        if process.poll() is not None:
            pytest.fail(f"tally exited ({process.returncode}):\n{log.read_text('utf-8')}")
        try:
            return client.get("/api/health", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    until_blocking(
        healthy,
        lambda: f"tally answering /api/health:\n{log.read_text()}",
        timeout_s=START_DEADLINE_S,
        poll_s=0.1,
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
