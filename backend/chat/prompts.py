"""Prompt rendering: templates from `prompts/` in a Jinja sandbox with StrictUndefined.

Only files in `prompts/` are template source. Everything passed in (user text, summaries,
memory lines, persona fields) is a value: `{{ 7*7 }}` inside it stays literal.
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import FileSystemLoader, StrictUndefined, TemplateError, TemplateNotFound
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

    def check(self, name: str, **sample: object) -> None:
        """Render `name` with sample values: a missing, broken or mismatched template fails
        here (at start-up, or when a tenant's settings change), not at a user's turn."""
        try:
            self._env.get_template(name).render(**sample)
        except TemplateNotFound as exc:
            raise ConfigError(f"prompt template {name!r}: no such file in prompts/") from exc
        except TemplateError as exc:
            raise ConfigError(f"prompt template {name!r}: {exc.message or exc}") from exc

    def render(self, name: str, **variables: object) -> str:
        return self._env.get_template(name).render(**variables).strip() + "\n"
