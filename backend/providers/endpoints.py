"""Where a provider's calls go, in the form error messages and `/api/health` show it.

Free of SDK imports, so the health route can name a provider's URL without loading its SDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from backend.settings import ProviderSettings

# The URL each kind calls when `base_url` is not set; kinds absent here make no network call.
DEFAULT_BASE_URLS: dict[str, str] = {
    "openai_compatible": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}


def base_url(settings: ProviderSettings) -> str | None:
    """The URL a provider's calls go to: its `base_url`, else its kind's default."""
    return settings.base_url or DEFAULT_BASE_URLS.get(settings.kind)


def display_url(url: str) -> str:
    """`url` fit to show and log: without user name, password, query or fragment, which can
    carry a secret."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass(frozen=True, slots=True)
class Endpoint:
    """What an adapter's error messages name: the provider, its URL, the environment variable
    its key comes from, and the timeouts a call runs under."""

    provider: str
    url: str  # display form
    host: str
    api_key_env: str | None
    has_key: bool
    connect_timeout_s: float
    timeout_s: float

    @classmethod
    def of(cls, provider: str, settings: ProviderSettings, url: str) -> Endpoint:
        return cls(
            provider=provider,
            url=display_url(url),
            host=urlsplit(url).hostname or "",
            api_key_env=settings.api_key_env,
            has_key=bool(settings.api_key()),
            connect_timeout_s=settings.connect_timeout_s,
            timeout_s=settings.timeout_s,
        )
