"""What a tenant id is: the tenant every install starts with, and the shape of any other.

An id is a lowercase slug because it names folders (a tenant's memory file and workspace) and
key paths in config.yaml (`tenants.<id>.…`): the pattern keeps it safe in both.
"""

from __future__ import annotations

import re

DEFAULT_TENANT = "default"  # created with the database; its memory is the top-level MEMORY.md
TENANT_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
