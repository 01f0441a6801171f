"""The documentation points only at what exists. Every relative link in README.md and docs/
reaches a file (and a heading, for `#anchor`, slugged as GitHub does), every repository path
written in backticks exists, every docs/ page is reachable from the README, and every `*.md`
document a code comment names is in the repository. The README stays short."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
DOCUMENTS = [README, *PAGES]
MAX_README_LINES = 250

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
REPOSITORY_PATH = re.compile(r"(?:backend|tests|bench|frontend|docs|prompts)/[\w./-]*")
# A document of the repository, as comments name one: a path in one of its folders
# (`docs/architecture.md`), or a name in capitals (`README.md`). Lower-case names
# elsewhere (`notes/plan.md`, `<tenant_id>/tenant.md`) are files Tally or a test writes.
DOCUMENT_NAME = re.compile(
    r"(?<![\w./<>-])(?:(?:docs|backend|tests|bench|frontend|prompts)/[\w./-]*|[A-Z][A-Z0-9_-]*)"
    r"\.md(?![\w.-]*\w)"
)
# Written at run time, not a document of the repository: each tenant's memory.
RUNTIME_FILES = {"MEMORY.md"}
SKIPPED_FOLDERS = {".git", ".venv", "node_modules", "data", "dist", "build", "__pycache__"}


def prose(path: Path) -> str:
    """The Markdown of `path` without its fenced code blocks (their `#` lines are no headings,
    their paths are examples)."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to `-`."""
    text = re.sub(r"`|\*\*|__", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for heading in HEADING.findall(prose(path)):
        base = candidate = slug(heading)
        number = 0
        while candidate in found:  # GitHub numbers repeated headings: name, name-1, name-2
            number += 1
            candidate = f"{base}-{number}"
        found.add(candidate)
    return found


def links(path: Path) -> Iterator[str]:
    for target in LINK.findall(prose(path)):
        if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: are not ours
            yield target


def resolve(path: Path, target: str) -> tuple[Path, str]:
    file, _, anchor = target.partition("#")
    return ((path.parent / file).resolve() if file else path), anchor


def named(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", DOCUMENTS, ids=named)
def test_every_link_reaches_a_file_and_a_heading(path: Path) -> None:
    dangling = []
    for target in links(path):
        file, anchor = resolve(path, target)
        if not file.exists():
            dangling.append(f"{target}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            dangling.append(f"{target}: no heading #{anchor} in {named(file)}")
    assert not dangling, f"{named(path)} links to what does not exist:\n" + "\n".join(dangling)


@pytest.mark.parametrize("path", DOCUMENTS, ids=named)
def test_every_repository_path_in_backticks_exists(path: Path) -> None:
    missing = [
        span
        for span in CODE_SPAN.findall(prose(path))
        if REPOSITORY_PATH.fullmatch(span) and not (ROOT / span).exists()
    ]
    assert not missing, f"{named(path)} names paths that do not exist: {missing}"


def test_every_page_is_linked_from_the_readme_or_another_page() -> None:
    linked = {resolve(path, target)[0] for path in DOCUMENTS for target in links(path)}
    orphans = [named(page) for page in PAGES if page.resolve() not in linked]
    assert not orphans, f"pages no document links to: {orphans}"


def test_the_readme_stays_short() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move detail into docs/"


def source_files() -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*")):
        if SKIPPED_FOLDERS.isdisjoint(path.relative_to(ROOT).parts) and path.is_file():
            yield path


def python_comments(text: str) -> Iterator[str]:
    """The comments and docstrings of a Python module: what its prose says."""
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            yield token.string
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            yield ast.get_docstring(node) or ""


def other_comments(path: Path) -> Iterator[str]:
    """`#` comments of the Makefile, TOML and YAML; `//` and `/* */` of JavaScript and CSS."""
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".js", ".css"):
        yield from re.findall(r"//[^\n]*|/\*.*?\*/", text, re.DOTALL)
    else:
        yield from re.findall(r"#[^\n]*", text)


def comments() -> Iterator[tuple[Path, str]]:
    for path in source_files():
        if path.suffix == ".py":
            yield from ((path, c) for c in python_comments(path.read_text(encoding="utf-8")))
        elif path.suffix in (".js", ".css", ".toml", ".yaml", ".sh") or path.name == "Makefile":
            yield from ((path, comment) for comment in other_comments(path))


def test_every_document_a_comment_names_exists() -> None:
    present = {path.name for path in source_files()}
    dangling = sorted(
        f"{named(path)}: {name}"
        for path, comment in comments()
        for name in DOCUMENT_NAME.findall(comment)
        if name not in RUNTIME_FILES
        and not ((ROOT / name).exists() if "/" in name else name in present)
    )
    assert not dangling, "comments name documents not in the repository:\n" + "\n".join(dangling)
