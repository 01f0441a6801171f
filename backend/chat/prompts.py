"""Prompt rendering: templates from `prompts/` in a Jinja sandbox with StrictUndefined.

Only files in `prompts/` are template source. Everything passed in (user text, summaries,
memory lines, persona fields) is a value: `{{ 7*7 }}` inside it stays literal.
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import FileSystemLoader, StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from backend.errors import ConfigError


class PromptRenderer:
    def __init__(self, prompts_dir: Path | str) -> None:
        self._env = SandboxedEnvironment(
            loader=FileSystemLoader(str(prompts_dir)),
            undefined=StrictUndefined,
            autoescape=False,
            keep_trailing_newline=False,
            auto_reload=False,
        )

    def check(self, name: str) -> None:
        """Fail at start-up, not at the first turn, when a template is missing or broken."""
        try:
            self._env.get_template(name)
        except TemplateError as exc:
            raise ConfigError(f"prompt template {name!r}: {exc}") from exc

    def render(self, name: str, **variables: object) -> str:
        return self._env.get_template(name).render(**variables).strip() + "\n"
