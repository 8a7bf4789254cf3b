"""The terminal app: a client of a run's event stream (see the README's layout)."""
