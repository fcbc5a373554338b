"""Indexes, search and encoding beyond one machine, on Ray (the ``ray`` extra)."""
