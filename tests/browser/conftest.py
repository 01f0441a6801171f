"""Fixtures for the browser tests (defined in harness.py): `browser`, `provider`, `tally`."""

import pytest

try:
    from tests.browser.harness import browser, provider, tally  # noqa: F401
except pytest.skip.Exception:
    pass  # Chromium or Playwright is missing: every test module here skips, saying which
