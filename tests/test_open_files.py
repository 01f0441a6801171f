"""The open-file limit is raised to the hard one at start, so a thousand streams at once do not
run out of sockets under the common soft default."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.process

PROBE = (
    "import resource; from backend.host.open_files import raise_open_files_limit; "
    "print(raise_open_files_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
)


def test_the_soft_limit_is_raised_to_the_hard_one() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = 4096 if hard == resource.RLIM_INFINITY else min(hard, 4096)

    def lowered() -> None:  # the child starts as under a stingy default
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, ceiling))

    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        preexec_fn=lowered,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=True,
    )
    assert result.stdout.split() == [str(ceiling), str(ceiling)]
