"""The workspace tools on real files and real symlinks: each tenant reads, lists and writes its
own directory and nothing else, and no result or error shows a host path."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from backend.settings.tools import WorkspaceSettings
from backend.tools.base import ToolContext, ToolFailed
from backend.tools.workspace import MAX_LINES, MAX_LISTED_ENTRIES, workspace_tools
from backend.tools.workspace_paths import open_directory_nofollow, read_regular_file

ACME = ToolContext(tenant_id="acme", session_id="s-acme", turn_id="t-acme")
GLOBEX = ToolContext(tenant_id="globex", session_id="s-globex", turn_id="t-globex")
SEED_README = "# CountBot\n\nCountBot 是一个智能助手框架。\n"
SEED_RESULT = (
    "[File: README.md | Lines: 3]\n  1| # CountBot\n  2|\n  3| CountBot 是一个智能助手框架。"
)


class Workspace:
    """The three tools over `tmp_path/workspaces`; every answer is checked for host paths."""

    def __init__(self, tmp_path: Path, settings: WorkspaceSettings) -> None:
        self.host = str(tmp_path)
        self.base = tmp_path / "workspaces"
        self.outside = tmp_path / "outside"
        self.outside.mkdir()
        (self.outside / "secret.txt").write_text("host secret\n")
        self.tools = {tool.name: tool for tool in workspace_tools(self.base, settings)}

    def folder(self, tenant: str = "acme") -> Path:
        path = self.base / tenant
        path.mkdir(parents=True, exist_ok=True)
        return path

    async def run(self, tool: str, context: ToolContext = ACME, **arguments: object) -> str:
        result = await self.tools[tool].run(arguments, context)
        assert self.host not in result
        return result

    async def refuse(self, tool: str, context: ToolContext = ACME, **arguments: object) -> str:
        with pytest.raises(ToolFailed) as failure:
            await self.tools[tool].run(arguments, context)
        message = str(failure.value)
        assert self.host not in message
        assert "/workspaces" not in message
        return message


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path, WorkspaceSettings(enabled=True))


def limited(tmp_path: Path, **limits: int) -> Workspace:
    return Workspace(tmp_path, WorkspaceSettings(enabled=True, **limits))


def test_the_three_tools_are_offered_by_name(workspace: Workspace) -> None:
    assert list(workspace.tools) == ["read_file", "list_files", "write_file"]


# Reading


async def test_reading_with_line_numbers_matches_the_seed_transcript(workspace: Workspace) -> None:
    (workspace.folder() / "README.md").write_text(SEED_README, encoding="utf-8")

    result = await workspace.run("read_file", path="README.md", show_line_numbers=True)

    assert result == SEED_RESULT


async def test_reading_without_line_numbers_gives_the_header_and_raw_lines(
    workspace: Workspace,
) -> None:
    (workspace.folder() / "README.md").write_text(SEED_README, encoding="utf-8")

    result = await workspace.run("read_file", path="README.md")

    assert result == "[File: README.md | Lines: 3]\n# CountBot\n\nCountBot 是一个智能助手框架。"


async def test_a_partial_read_names_the_lines_it_shows(workspace: Workspace) -> None:
    lines = [f"line {n}" for n in range(1, 1201)]
    (workspace.folder() / "big.txt").write_text("\n".join(lines) + "\n")

    first = (await workspace.run("read_file", path="big.txt")).split("\n")
    last = await workspace.run(
        "read_file", path="big.txt", show_line_numbers=True, start_line=1199, max_lines=5
    )

    assert first[0] == "[File: big.txt | Lines: 1-400 of 1200]"
    assert first[1:] == lines[:400]
    assert last == "[File: big.txt | Lines: 1199-1200 of 1200]\n1199| line 1199\n1200| line 1200"


async def test_max_lines_is_capped(workspace: Workspace) -> None:
    (workspace.folder() / "big.txt").write_text("x\n" * (MAX_LINES + 10))

    result = await workspace.run("read_file", path="big.txt", max_lines=MAX_LINES * 10)

    assert result.startswith(f"[File: big.txt | Lines: 1-{MAX_LINES} of {MAX_LINES + 10}]\n")
    assert result.count("\n") == MAX_LINES


async def test_a_start_line_past_the_end_is_refused(workspace: Workspace) -> None:
    (workspace.folder() / "short.txt").write_text("one\ntwo\n")

    message = await workspace.refuse("read_file", path="short.txt", start_line=3)

    assert "past the end" in message and "2 lines" in message


async def test_an_empty_file_has_no_lines(workspace: Workspace) -> None:
    (workspace.folder() / "empty.txt").write_text("")

    assert await workspace.run("read_file", path="empty.txt") == "[File: empty.txt | Lines: 0]"


async def test_a_missing_file_is_not_found(workspace: Workspace) -> None:
    message = await workspace.refuse("read_file", path="nowhere.txt")

    assert message == "nowhere.txt: no such file or directory"


async def test_a_binary_file_is_refused_as_not_text(workspace: Workspace) -> None:
    (workspace.folder() / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (workspace.folder() / "nul.bin").write_bytes(b"text\x00more")

    assert "not a text file" in await workspace.refuse("read_file", path="logo.png")
    assert "not a text file" in await workspace.refuse("read_file", path="nul.bin")


async def test_a_file_larger_than_max_file_bytes_is_not_read(tmp_path: Path) -> None:
    workspace = limited(tmp_path, max_file_bytes=10)
    (workspace.folder() / "ten.txt").write_text("0123456789")
    (workspace.folder() / "eleven.txt").write_text("0123456789a")

    assert (
        await workspace.run("read_file", path="ten.txt") == "[File: ten.txt | Lines: 1]\n0123456789"
    )
    assert "larger than the 10 bytes" in await workspace.refuse("read_file", path="eleven.txt")


async def test_reading_a_folder_points_to_list_files(workspace: Workspace) -> None:
    (workspace.folder() / "notes").mkdir()

    assert "use list_files" in await workspace.refuse("read_file", path="notes")


async def test_a_fifo_is_refused_without_blocking(workspace: Workspace) -> None:
    os.mkfifo(workspace.folder() / "pipe")

    assert "not a regular file" in await workspace.refuse("read_file", path="pipe")
    assert "not a regular file" in await workspace.refuse(
        "write_file", path="pipe", content="x", mode="append"
    )


# Listing


async def test_listing_shows_folders_with_a_slash_and_files_with_sizes_sorted(
    workspace: Workspace,
) -> None:
    root = workspace.folder()
    (root / "notes" / "old").mkdir(parents=True)
    (root / "notes" / "todo.md").write_text("- buy milk\n")
    (root / "b.txt").write_text("bb")
    (root / "a.txt").write_text("")

    listing = await workspace.run("list_files")
    below = await workspace.run("list_files", path="notes")

    assert listing.split("\n") == [
        "a.txt (0 bytes)",
        "b.txt (2 bytes)",
        "notes/",
        "notes/old/",
        "notes/todo.md (11 bytes)",
    ]
    assert below.split("\n") == ["notes/old/", "notes/todo.md (11 bytes)"]


async def test_an_empty_workspace_says_so(workspace: Workspace) -> None:
    assert await workspace.run("list_files") == "the workspace is empty"


async def test_an_empty_folder_says_so(workspace: Workspace) -> None:
    (workspace.folder() / "notes").mkdir()

    assert await workspace.run("list_files", path="notes/") == "notes/ is empty"


async def test_a_long_listing_is_cut_and_says_so(workspace: Workspace) -> None:
    for number in range(MAX_LISTED_ENTRIES + 20):
        (workspace.folder() / f"f{number:04}.txt").write_text("")

    lines = (await workspace.run("list_files")).split("\n")

    assert len(lines) == MAX_LISTED_ENTRIES + 1
    assert lines[0] == "f0000.txt (0 bytes)"
    assert f"stopped at {MAX_LISTED_ENTRIES} entries" in lines[-1]


async def test_listing_shows_symlinks_without_following_them(workspace: Workspace) -> None:
    (workspace.folder() / "etc").symlink_to(workspace.outside)

    listing = await workspace.run("list_files")

    assert listing == "etc (symbolic link, not followed)"


async def test_listing_a_missing_folder_or_a_file_is_refused(workspace: Workspace) -> None:
    (workspace.folder() / "a.txt").write_text("a")

    assert "no such file" in await workspace.refuse("list_files", path="nowhere")
    assert "Not a directory" in await workspace.refuse("list_files", path="a.txt")


# Writing


async def test_writing_creates_the_file_and_its_folders(workspace: Workspace) -> None:
    result = await workspace.run("write_file", path="notes/2024/todo.md", content="- 写报告\n")

    assert result == "wrote 12 bytes to notes/2024/todo.md"
    assert (workspace.base / "acme/notes/2024/todo.md").read_text() == "- 写报告\n"
    assert await workspace.run("list_files") == (
        "notes/\nnotes/2024/\nnotes/2024/todo.md (12 bytes)"
    )


async def test_the_workspace_folder_is_private_and_made_on_first_use(
    workspace: Workspace,
) -> None:
    assert not (workspace.base / "acme").exists()

    await workspace.run("list_files")

    assert stat.S_IMODE((workspace.base / "acme").stat().st_mode) == 0o700


async def test_overwrite_replaces_the_file_and_append_adds_to_it(workspace: Workspace) -> None:
    await workspace.run("write_file", path="log.txt", content="first\n")
    await workspace.run("write_file", path="log.txt", content="second\n")
    appended = await workspace.run("write_file", path="log.txt", content="third\n", mode="append")

    assert appended == "appended 6 bytes to log.txt (now 13 bytes)"
    assert (workspace.base / "acme/log.txt").read_text() == "second\nthird\n"
    assert await workspace.run("list_files") == "log.txt (13 bytes)"  # no temporary left


async def test_appending_to_a_missing_file_creates_it(workspace: Workspace) -> None:
    await workspace.run("write_file", path="new.txt", content="x", mode="append")

    assert (workspace.base / "acme/new.txt").read_text() == "x"


async def test_an_unknown_mode_or_missing_content_is_refused(workspace: Workspace) -> None:
    assert "mode" in await workspace.refuse("write_file", path="a", content="x", mode="insert")
    assert "content" in await workspace.refuse("write_file", path="a")


async def test_content_beyond_max_file_bytes_is_refused(tmp_path: Path) -> None:
    workspace = limited(tmp_path, max_file_bytes=10)

    too_big = await workspace.refuse("write_file", path="a.txt", content="好" * 4)  # 12 bytes
    await workspace.run("write_file", path="a.txt", content="0123456789")
    too_long = await workspace.refuse("write_file", path="a.txt", content="+", mode="append")

    assert "would be 12 bytes" in too_big and "would be 11 bytes" in too_long
    assert (workspace.base / "acme/a.txt").read_text() == "0123456789"


async def test_a_write_beyond_max_total_bytes_is_refused(tmp_path: Path) -> None:
    workspace = limited(tmp_path, max_total_bytes=100)
    await workspace.run("write_file", path="a.txt", content="a" * 60)

    message = await workspace.refuse("write_file", path="b.txt", content="b" * 41)
    await workspace.run("write_file", path="b.txt", content="b" * 40)
    # Overwriting counts the old content out: 80 + 40 fits where 60 + 80 + 40 would not.
    await workspace.run("write_file", path="a.txt", content="a" * 60)
    await workspace.refuse("write_file", path="a.txt", content="a" * 61)

    assert "would hold 101 bytes" in message
    assert not (workspace.base / "acme/b.txt").read_text().startswith("b" * 41)


async def test_a_new_file_beyond_max_files_is_refused_but_overwriting_is_allowed(
    tmp_path: Path,
) -> None:
    workspace = limited(tmp_path, max_files=2)
    await workspace.run("write_file", path="one.txt", content="1")
    await workspace.run("write_file", path="sub/two.txt", content="2")

    message = await workspace.refuse("write_file", path="three.txt", content="3")
    await workspace.run("write_file", path="sub/two.txt", content="two")

    assert "limit of 2 files" in message
    assert not (workspace.base / "acme/three.txt").exists()


async def test_writing_over_a_folder_is_refused(workspace: Workspace) -> None:
    (workspace.folder() / "notes").mkdir()

    assert "is a folder" in await workspace.refuse("write_file", path="notes", content="x")


# Paths that are refused


@pytest.mark.parametrize("path", ["..", "../x", "a/../../x", "a/..", "../globex/secret.txt"])
async def test_a_path_with_dotdot_is_refused(workspace: Workspace, path: str) -> None:
    (workspace.folder() / "a").mkdir()

    for tool in ("read_file", "list_files"):
        assert "'..'" in await workspace.refuse(tool, path=path)
    assert "'..'" in await workspace.refuse("write_file", path=path, content="x")
    assert not (workspace.base / "x").exists()


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "C:\\Windows\\win.ini", "C:/Windows", "\\\\server\\share\\x"]
)
async def test_an_absolute_path_is_refused(workspace: Workspace, path: str) -> None:
    for tool in ("read_file", "list_files"):
        assert "absolute paths are not allowed" in await workspace.refuse(tool, path=path)
    message = await workspace.refuse("write_file", path=path, content="x")
    assert "absolute paths are not allowed" in message


async def test_a_host_path_into_the_workspace_is_refused_without_repeating_it(
    workspace: Workspace,
) -> None:
    (workspace.folder() / "a.txt").write_text("a")

    # `refuse` checks that the message does not echo the host path.
    await workspace.refuse("read_file", path=str(workspace.base / "acme" / "a.txt"))


async def test_a_backslash_in_the_path_is_refused(workspace: Workspace) -> None:
    assert "backslash" in await workspace.refuse("read_file", path="notes\\todo.md")
    assert "backslash" in await workspace.refuse("write_file", path="a\\..\\..\\x", content="x")


async def test_a_nul_in_the_path_is_refused(workspace: Workspace) -> None:
    assert "NUL" in await workspace.refuse("read_file", path="a.txt\x00.png")
    assert "NUL" in await workspace.refuse("write_file", path="a\x00b", content="x")
    assert "NUL" in await workspace.refuse("list_files", path="\x00")


@pytest.mark.parametrize("path", ["", "/", ".", "./", None])
async def test_an_empty_path_is_refused_for_reading_and_writing(
    workspace: Workspace, path: str | None
) -> None:
    await workspace.refuse("read_file", path=path)
    await workspace.refuse("write_file", path=path, content="x")


async def test_a_symlink_pointing_out_is_refused(workspace: Workspace) -> None:
    (workspace.folder() / "leak.txt").symlink_to(workspace.outside / "secret.txt")

    assert "outside the workspace" in await workspace.refuse("read_file", path="leak.txt")
    assert "symbolic link" in await workspace.refuse("write_file", path="leak.txt", content="x")
    assert (workspace.outside / "secret.txt").read_text() == "host secret\n"


async def test_a_symlinked_folder_pointing_out_is_refused_as_a_step_of_the_path(
    workspace: Workspace,
) -> None:
    (workspace.folder() / "etc").symlink_to(workspace.outside)

    read = await workspace.refuse("read_file", path="etc/secret.txt")
    listed = await workspace.refuse("list_files", path="etc")
    written = await workspace.refuse("write_file", path="etc/new.txt", content="x")
    nested = await workspace.refuse("write_file", path="etc/deeper/new.txt", content="x")

    assert {read, listed, written, nested} == {"path leads outside the workspace"}
    assert sorted(p.name for p in workspace.outside.iterdir()) == ["secret.txt"]


async def test_a_symlink_to_the_root_of_the_host_is_refused(workspace: Workspace) -> None:
    (workspace.folder() / "root").symlink_to("/")

    assert "outside" in await workspace.refuse("read_file", path="root/etc/passwd")
    assert "outside" in await workspace.refuse("list_files", path="root")


async def test_a_symlink_into_another_tenants_folder_is_refused(workspace: Workspace) -> None:
    (workspace.folder("globex") / "secret.txt").write_text("globex only\n")
    (workspace.folder() / "peer").symlink_to(workspace.base / "globex")
    (workspace.folder() / "peer.txt").symlink_to(workspace.base / "globex" / "secret.txt")
    (workspace.folder() / "up").symlink_to("..")

    assert "outside" in await workspace.refuse("read_file", path="peer/secret.txt")
    assert "outside" in await workspace.refuse("read_file", path="peer.txt")
    assert "outside" in await workspace.refuse("read_file", path="up/globex/secret.txt")
    assert "outside" in await workspace.refuse("list_files", path="peer")
    assert "outside" in await workspace.refuse("write_file", path="peer/secret.txt", content="x")
    assert (workspace.base / "globex/secret.txt").read_text() == "globex only\n"


async def test_a_symlink_to_a_tenant_whose_name_starts_the_same_is_refused(
    workspace: Workspace,
) -> None:
    (workspace.folder("acme-old") / "secret.txt").write_text("old tenant\n")
    (workspace.folder() / "old").symlink_to(workspace.base / "acme-old")

    assert "outside" in await workspace.refuse("read_file", path="old/secret.txt")


async def test_writing_through_a_symlink_is_refused_even_when_it_points_inside(
    workspace: Workspace,
) -> None:
    (workspace.folder() / "real.txt").write_text("real\n")
    (workspace.folder() / "alias.txt").symlink_to("real.txt")

    for mode in ("overwrite", "append"):
        message = await workspace.refuse("write_file", path="alias.txt", content="x", mode=mode)
        assert "symbolic link" in message
    assert (workspace.base / "acme/real.txt").read_text() == "real\n"
    assert (workspace.base / "acme/alias.txt").is_symlink()


async def test_reading_through_a_symlink_that_stays_inside_is_allowed(
    workspace: Workspace,
) -> None:
    (workspace.folder() / "docs").mkdir()
    (workspace.folder() / "docs/real.txt").write_text("inside\n")
    (workspace.folder() / "alias.txt").symlink_to("docs/real.txt")
    (workspace.folder() / "d").symlink_to("docs")

    assert await workspace.run("read_file", path="alias.txt") == (
        "[File: alias.txt | Lines: 1]\ninside"
    )
    assert await workspace.run("list_files", path="d") == "d/real.txt (7 bytes)"
    assert await workspace.run("write_file", path="d/new.txt", content="ok") == (
        "wrote 2 bytes to d/new.txt"
    )
    assert (workspace.base / "acme/docs/new.txt").read_text() == "ok"


def test_a_symlink_swapped_in_after_the_check_is_not_followed(tmp_path: Path) -> None:
    """The moment between the real-path check and the open cannot be staged through the tools,
    so this opens already-checked components as they do, after swapping in symlinks."""
    root = tmp_path / "acme"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret\n")
    (root / "docs").symlink_to(outside)  # was a real folder when checked
    (root / "notes.txt").symlink_to(outside / "secret.txt")  # was a real file when checked

    with pytest.raises(OSError), open_directory_nofollow(str(root), ("docs",), create=False):
        pass
    with open_directory_nofollow(str(root), (), create=False) as at, pytest.raises(OSError):
        read_regular_file(at, "notes.txt", 100, "notes.txt")


# Tenants


async def test_tenants_never_see_each_others_files(workspace: Workspace) -> None:
    await workspace.run("write_file", ACME, path="secret.txt", content="acme only\n")

    message = await workspace.refuse("read_file", GLOBEX, path="secret.txt")
    listing = await workspace.run("list_files", GLOBEX)

    assert message == "secret.txt: no such file or directory"
    assert listing == "the workspace is empty"
    assert await workspace.run("list_files", ACME) == "secret.txt (10 bytes)"


async def test_no_path_reaches_another_tenants_folder(workspace: Workspace) -> None:
    await workspace.run("write_file", ACME, path="secret.txt", content="acme only\n")
    host_path = str(workspace.base / "acme" / "secret.txt")

    for path in ("../acme/secret.txt", host_path, "./../acme/secret.txt", "acme/secret.txt"):
        await workspace.refuse("read_file", GLOBEX, path=path)
        await workspace.refuse("list_files", GLOBEX, path=path.removesuffix("/secret.txt"))
    for path in ("../acme/secret.txt", host_path, "./../acme/secret.txt"):
        await workspace.refuse("write_file", GLOBEX, path=path, content="x")
    # A folder named like the other tenant is only a folder of one's own.
    await workspace.run("write_file", GLOBEX, path="acme/secret.txt", content="globex's")

    assert (workspace.base / "acme/secret.txt").read_text() == "acme only\n"
    assert (workspace.base / "globex/acme/secret.txt").read_text() == "globex's"


async def test_a_tenant_id_that_is_not_a_slug_has_no_workspace(workspace: Workspace) -> None:
    intruder = ToolContext(tenant_id="..", session_id="s", turn_id="t")

    assert "no workspace" in await workspace.refuse("list_files", intruder)
