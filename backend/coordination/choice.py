"""Which coordinator a config asks for."""

from __future__ import annotations

from backend.coordination.base import Coordinator
from backend.coordination.local import LocalCoordinator
from backend.settings.coordination import CoordinationSettings


def open_coordinator(settings: CoordinationSettings) -> Coordinator:
    """Redis when config.yaml names one (several processes), else this process alone."""
    if settings.redis_url is None:
        return LocalCoordinator()
    # Imported here: the Redis client costs a process ~20 MB, and one process alone never uses it.
    from backend.coordination.redis import RedisCoordinator

    return RedisCoordinator(
        settings.redis_url, prefix=settings.key_prefix, password=settings.redis_password()
    )
