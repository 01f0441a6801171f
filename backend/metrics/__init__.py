"""Prometheus metrics: the registry and its counters (`registry`), and the one place a turn's
events become metrics (`turns`)."""
