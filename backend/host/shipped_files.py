"""The files Tally ships beside its code: the web page, the prompt templates and the commented
config.yaml.

The top-level `frontend/`, `prompts/` and `config.yaml` of the checkout are their only source.
A wheel carries them inside the package, at `backend/bundled/` (mapped there at build time, see
pyproject.toml); a checkout, and the editable install made from it, has no `backend/bundled/`
and uses the top-level ones.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # backend/
_INSTALLED = _PACKAGE / "bundled"
_CHECKOUT = _PACKAGE.parent


def bundled(name: str) -> Path:
    """The shipped file or folder `name`: inside the installed package when a wheel put it
    there, else at the top of the checkout."""
    installed = _INSTALLED / name
    return installed if installed.exists() else _CHECKOUT / name


def frontend_dir() -> Path:
    return bundled("frontend")


def prompts_dir() -> Path:
    return bundled("prompts")


def example_config() -> Path:
    """The commented config.yaml that `tally init` copies."""
    return bundled("config.yaml")
