"""What every settings model shares: strict parsing, and secrets named by environment
variable (`OPENAI_API_KEY` or `${OPENAI_API_KEY}`), never written in the file."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def env_name(value: str) -> str:
    """The variable's name, from `NAME` or `${NAME}`."""
    match = _ENV_REF.match(value)
    name = match.group(1) if match else value
    if not _ENV_NAME.fullmatch(name):
        raise ValueError("name an environment variable, e.g. OPENAI_API_KEY")
    return name


EnvName = Annotated[str, AfterValidator(env_name)]
