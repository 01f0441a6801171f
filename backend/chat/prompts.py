"""Prompt rendering: templates from `prompts/` in a Jinja sandbox with StrictUndefined.

Only files in `prompts/` are template source: the configured folder, then the shipped one for
a template it lacks (a folder an older `tally init` wrote still starts). Everything passed in
(user text, summaries, memory lines, persona fields) is a value: `{{ 7*7 }}` inside it stays
literal.
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import (
    ChoiceLoader,
    FileSystemLoader,
    StrictUndefined,
    TemplateError,
    TemplateNotFound,
)
from jinja2.sandbox import SandboxedEnvironment

from backend.errors import ConfigError
from backend.host.shipped_files import prompts_dir as shipped_prompts_dir

# What each turn adds after its user message (the time, memory picked for the message).
TURN_CONTEXT_TEMPLATE = "turn_context.md.j2"


class TemplateProblem(ConfigError):
    """A template that is missing or does not render. The message never names server paths
    (tenants see it); `prompts_dir` is for the operator's own tools."""

    def __init__(self, message: str, *, prompts_dir: Path) -> None:
        super().__init__(message)
        self.prompts_dir = prompts_dir

    def at(self, key_path: str) -> TemplateProblem:
        """The same problem, named by the setting that chose the template."""
        return TemplateProblem(f"{key_path}: {self.message}", prompts_dir=self.prompts_dir)


class PromptRenderer:
    def __init__(self, prompts_dir: Path | str) -> None:
        self.prompts_dir = Path(prompts_dir)
        self._env = SandboxedEnvironment(
            loader=ChoiceLoader(
                [FileSystemLoader(str(prompts_dir)), FileSystemLoader(str(shipped_prompts_dir()))]
            ),
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
            raise TemplateProblem(
                f"{name!r} is not in the prompts folder", prompts_dir=self.prompts_dir
            ) from exc
        except TemplateError as exc:
            raise TemplateProblem(
                f"{name!r} does not render: {exc.message or exc}", prompts_dir=self.prompts_dir
            ) from exc

    def render(self, name: str, **variables: object) -> str:
        return self._env.get_template(name).render(**variables).strip() + "\n"
