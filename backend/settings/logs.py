"""`logging:` in config.yaml: how `tally serve` writes its log lines."""

from __future__ import annotations

from typing import Literal

from backend.settings.base import Strict


class LoggingSettings(Strict):
    # text: `time LEVEL logger: message key=value ...`; json: one JSON object a line.
    format: Literal["text", "json"] = "text"
