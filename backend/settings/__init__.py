"""Tally's settings: `config.yaml`, parsed once and strictly, then passed down.

This is the one public import for the settings and their loading (`from backend.settings import
Settings, load_settings`). The sections live in modules named by role (`server`, `providers`,
`memory`, `tools`, `channels`, `coordination`, `pricing`, `logs`); `config` holds the root model,
loading and the per-tenant overrides; `base` and `problems` are what every section shares.
Nothing here imports a package above `domain/`: every layer reads the settings.
"""

from backend.settings.config import PersonaSettings as PersonaSettings
from backend.settings.config import Settings as Settings
from backend.settings.config import file_only_problems as file_only_problems
from backend.settings.config import layered_overrides as layered_overrides
from backend.settings.config import load_settings as load_settings
from backend.settings.config import parse_settings as parse_settings
from backend.settings.config import tenant_settings as tenant_settings
from backend.settings.memory import MemorySettings as MemorySettings
from backend.settings.providers import ModelSettings as ModelSettings
from backend.settings.providers import ProviderSettings as ProviderSettings
from backend.settings.server import DatabaseSettings as DatabaseSettings
from backend.settings.server import ServerSettings as ServerSettings
