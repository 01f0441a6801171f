"""discord.py, imported once for the package: its voice player imports `audioop`, which warns
of its removal at import time (Python 3.11-3.12), and a warning there is no failure of ours.
The package's modules take `discord` from here, and reach its submodules as attributes."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord as discord
