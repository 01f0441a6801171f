"""`tally bench`: the benchmark runner, the prompt-build measurement and the report."""
