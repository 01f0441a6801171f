"""`tally eval`: regression harnesses users can run against the real pipeline (memory)."""
