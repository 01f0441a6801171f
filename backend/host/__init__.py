"""What Tally takes from the machine it runs on: the files shipped beside its code
(`shipped_files`) and the open-file limit of its process (`open_files`)."""
