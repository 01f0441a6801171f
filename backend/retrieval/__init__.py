"""Finding what memory holds: facts and archived turns ranked by words and meaning."""
