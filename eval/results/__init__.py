"""How each evaluator writes its results: its rows read back and grouped (rows.py), a plain markdown table and
plots per evaluator. Nothing here knows of a study page."""
