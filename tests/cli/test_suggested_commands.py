"""Every command Tally suggests exists: each `tally …` that the code (an error, a hint, a help
text), the README or a docs/ page names is a verb, action and option the command line has, and
each `make …` a Makefile target. A suggestion of a command that is not there fails here."""

from __future__ import annotations

import argparse
import re

import pytest

from backend.cli.main import _parser
from tests.conftest import ROOT

QUOTED = re.compile(r"`(tally [^`]+)`")
MAKE = re.compile(r"`?\bmake ([a-z]+)\b(?:`| [A-Z]+=)")
WHERE = [
    *sorted((ROOT / "backend").rglob("*.py")),
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),  # the README's sections moved there (issue 31)
    ROOT / "Makefile",
]


def suggestions() -> list[tuple[str, str]]:
    """(where, the command) for each `tally …` named, alternatives (`a | b`) apart."""
    found = []
    for path in WHERE:
        text = path.read_text(encoding="utf-8").replace("\\|", "|")
        for match in QUOTED.finditer(text):
            where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
            found += [(where, command) for command in alternatives(match.group(1))]
    return found


def alternatives(command: str) -> list[str]:
    """`tally tenants create ID | list | disable ID` → one command each."""
    first, *others = [part.strip() for part in command.split(" | ")]
    prefix = first.split()[:2] if len(first.split()) > 2 else first.split()
    return [first] + [" ".join([*prefix, other]) for other in others if other]


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def problem(command: str) -> str | None:
    """Why `command` is not one the command line has; None when it is."""
    words = command.split()[1:]
    parser = _parser()
    verbs = subcommands(parser)
    while words and words[0].startswith("--"):  # options before the verb (--config F)
        words = words[2:]
    if not words or words[0] in ("...", "…"):  # `tally ...`: any command
        return None
    verb = verbs.get(words[0])
    if verb is None:
        return f"no verb {words[0]!r}"
    options = verb._option_string_actions
    choices = [a.choices for a in verb._actions if a.choices and not a.option_strings]
    for index, word in enumerate(words[1:]):
        if word.startswith("-") and word.split("=")[0].strip("[]") not in options:
            return f"no option {word!r} for {words[0]!r}"
        is_action = index == 0 and choices and re.fullmatch(r"[a-z]+", word)
        if is_action and word not in choices[0]:
            return f"no action {word!r} for {words[0]!r} (it has {', '.join(choices[0])})"
    return None


def test_the_suggestions_are_found() -> None:
    commands = [command for _, command in suggestions()]
    assert "tally tenants enable ID" in commands  # the table in docs/operations.md
    assert any(c.startswith("tally tenants enable {tenant_id}") for c in commands)  # 403's hint
    assert problem("tally tenants revive acme") is not None  # and a wrong one is caught
    assert problem("tally serve --wrokers 2") is not None


@pytest.mark.parametrize(("where", "command"), suggestions())
def test_every_suggested_tally_command_exists(where: str, command: str) -> None:
    assert problem(command) is None, f"{where}: `{command}`: {problem(command)}"


def test_every_suggested_make_target_exists() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z]+):", makefile, re.MULTILINE))
    named = {target for path in WHERE for target in MAKE.findall(path.read_text(encoding="utf-8"))}
    assert named >= {"run", "test", "lock"}
    assert named <= targets, f"named but not in the Makefile: {named - targets}"


def test_the_commands_help_names_every_verb(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["--help"])
    shown = capsys.readouterr().out
    assert all(verb in shown for verb in subcommands(_parser()))
