"""A throwaway PostgreSQL cluster of the test's own (initdb + pg_ctl in a temporary directory),
which a test may stop, crash and start again without touching the shared server. PostgreSQL
refuses to run as root: as root, the cluster runs as the `postgres` user."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class Cluster:
    def __init__(self, root: Path, bin_dir: Path, user: str | None) -> None:
        self.root = root
        self.data = root / "data"
        self.port = _free_port()
        self._bin = bin_dir
        self._user = user

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self._bin / tool), *args]
        if self._user is not None:
            command = ["runuser", "-u", self._user, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed: {done.stdout}{done.stderr}")

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")

    def start(self) -> None:
        """Start and wait until it accepts connections (`pg_ctl -w`)."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "log"),
            "-w",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        """`fast`: a clean shutdown that ends every session; `immediate`: as a crash."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")


@contextmanager
def throwaway_cluster() -> Iterator[Cluster]:
    """A started cluster; stopped and removed afterwards. Skips without PostgreSQL's tools. It
    lives in a directory of its own under /tmp, which the postgres user can reach (pytest's
    temporary directories are the running user's only)."""
    if not BIN_DIRS or not (BIN_DIRS[0] / "initdb").exists():
        pytest.skip("a throwaway PostgreSQL needs initdb and pg_ctl (/usr/lib/postgresql)")
    user = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("PostgreSQL refuses root, and there is no postgres user to run it")
        user = "postgres"
    root = Path(tempfile.mkdtemp(prefix="tally-pg-"))
    if user is not None:
        shutil.chown(root, user)
    cluster = Cluster(root, BIN_DIRS[0], user)
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        try:
            cluster.stop("immediate")
        except RuntimeError:
            pass  # stopped by the test, or never started
        shutil.rmtree(root, ignore_errors=True)
