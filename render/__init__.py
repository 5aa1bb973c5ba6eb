"""Reports from committed rows: tables, plots, merging, `make reports`; never loads a model."""
