"""Long administrative operations over the whole application (re-summarizing memory, exporting
it), shared by the console's API and the `tally` command line."""
