"""`tally init [DIR]`: a commented config.yaml and the prompt templates, to customise.

The files are copies of the shipped ones (`backend/host/shipped_files.py`): the config is the
checkout's own config.yaml, so its relative paths (database, MEMORY.md, data/) and the
`prompts/` written beside it resolve inside DIR. Nothing is overwritten without `--force`, and
nothing is written at all when any target exists.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from backend.host.shipped_files import example_config, prompts_dir


def run_init(directory: Path, *, is_forced: bool) -> int:
    files = _files_to_write(directory)
    existing = [target for _, target in files if target.exists()]
    if existing and not is_forced:
        names = "\n".join(f"  {target}" for target in existing)
        print(
            f"tally init: these already exist, so nothing was written:\n{names}\n"
            "Pass --force to overwrite them.",
            file=sys.stderr,
        )
        return 1
    for source, target in files:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
        except OSError as exc:
            print(f"tally init: cannot write {target}: {exc.strerror}", file=sys.stderr)
            return 1
        print(f"wrote {target}")
    print(
        "Edit config.yaml (the model, and the environment variable holding its key) and the "
        "templates in prompts/, then start the server:\n"
        f"  {_serve_command(directory)}"
    )
    return 0


def _files_to_write(directory: Path) -> list[tuple[Path, Path]]:
    """(shipped file, where it goes) for config.yaml and every prompt template."""
    templates = sorted(
        path for path in prompts_dir().iterdir() if path.is_file() and not path.name.startswith(".")
    )
    return [
        (example_config(), directory / "config.yaml"),
        *((template, directory / "prompts" / template.name) for template in templates),
    ]


def _serve_command(directory: Path) -> str:
    if directory.resolve() == Path.cwd().resolve():
        return "tally serve"
    return f"cd {shlex.quote(str(directory))} && tally serve"
