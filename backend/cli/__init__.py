"""The `tally` command: `main.py` parses the command line; each verb has a module."""
