"""The lock files agree with pyproject.toml: every requirement is pinned to a version it allows,
with hashes, the test tools' lock pins the serving packages at the same versions, and everything
a pinned package needs is pinned too. A change to pyproject.toml without `make lock` fails here.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import ROOT

RUN_LOCK = ROOT / "requirements" / "run.txt"
DEV_LOCK = ROOT / "requirements" / "dev.txt"


def pins(lock: Path) -> dict[str, Version]:
    """Each `name==version` of a lock whose marker holds here, every one followed by hashes."""
    pinned: dict[str, Version] = {}
    entries = lock.read_text().replace("\\\n", " ").splitlines()
    for entry in entries:
        if not entry.strip() or entry.lstrip().startswith("#"):
            continue
        requirement_text, _, hashes = entry.partition(" --hash=")
        requirement = Requirement(requirement_text.strip())
        assert hashes.startswith("sha256:"), f"{lock.name}: {requirement.name} has no hash"
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", f"{lock.name}: {requirement} is not an exact pin"
        if requirement.marker is None or requirement.marker.evaluate():
            pinned[canonicalize_name(requirement.name)] = Version(specifier.version)
    return pinned


def declared(*, dev: bool) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    texts = project["project"]["dependencies"] + project["build-system"]["requires"]
    if dev:
        texts = texts + project["project"]["optional-dependencies"]["dev"]
    return [Requirement(text) for text in texts]


@pytest.mark.parametrize(("lock", "dev"), [(RUN_LOCK, False), (DEV_LOCK, True)])
def test_every_declared_requirement_is_pinned_to_an_allowed_version(lock: Path, dev: bool) -> None:
    pinned = pins(lock)
    for requirement in declared(dev=dev):
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{requirement} is in pyproject.toml but not in {lock.name}"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"{lock.name} pins {name}=={pinned[name]}, outside {requirement}: run `make lock`"
        )


def test_the_test_lock_pins_the_serving_packages_at_the_same_versions() -> None:
    serving, testing = pins(RUN_LOCK), pins(DEV_LOCK)
    differing = {name: (version, testing.get(name)) for name, version in serving.items()}
    assert {name: pair for name, pair in differing.items() if pair[0] != pair[1]} == {}


def test_what_a_pinned_package_needs_is_pinned_too() -> None:
    """Read from the installed packages' own metadata, with the extras pyproject.toml asks for."""
    pinned = pins(DEV_LOCK)
    extras: dict[str, set[str]] = {}
    for requirement in declared(dev=True):
        extras.setdefault(canonicalize_name(requirement.name), set()).update(requirement.extras)
    unpinned: list[str] = []
    for name in pinned:
        for needed in installed_requirements(name, extras.get(name, set())):
            if canonicalize_name(needed.name) not in pinned:
                unpinned.append(f"{name} needs {needed}")
    assert unpinned == []


def installed_requirements(name: str, extras: set[str]) -> list[Requirement]:
    try:
        texts = metadata.requires(name) or []
    except metadata.PackageNotFoundError:
        return []  # a package only other platforms install (its marker held nowhere here)
    needed = []
    for requirement in map(Requirement, texts):
        environments = [{**default_environment(), "extra": extra} for extra in ("", *extras)]
        marker = requirement.marker
        if marker is None or any(marker.evaluate(env) for env in environments):
            needed.append(requirement)
    return needed
