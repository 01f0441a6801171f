"""`python -m backend ...`, the same as the `tally` command."""

from backend.cli import main

raise SystemExit(main())
