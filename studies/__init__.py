"""The studies: each folder is one, whole (make targets, run configs, committed rows, README, values, claims).
They import the core; the core never imports them (tests/test_layout.py)."""
