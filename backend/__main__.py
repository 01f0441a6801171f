"""`python -m backend ...`, the same as the `tally` command."""

from backend.cli.main import main

raise SystemExit(main())
