"""The measured prose of the task track (reports/tasks/README.md), rendered by `make reports` from the committed rows:
each paragraph between <!-- rendered: NAME --> and <!-- /rendered --> lines of its page, each comparative sentence
written only while its predicate over the rows holds (render.prose). The rows: results.json.gz and training.json (the
track's seeds), context/METHOD/results.json.gz, anchor/SETTING/results.json.gz, heads/ and heads-16x/ (eval.heads),
recipe-search/ (each search run's validation log and the table's rows.json).

track.py reads the rows; seeds.py, context.py, search.py and methods.py write the page's sections from them."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from render.task_track.context import context_intro, dca, leaky_rerope, logn, rerope, self_extend, sinks
from render.task_track.methods import every_method
from render.task_track.search import each_step, fewer_steps, recipe, search_nope, search_status
from render.task_track.seeds import (
    anchor, beside_kazemnejad, profile, readme_summary, retrained, seed_16, seeds_intro, seeds_show, where_heads_look)

# {page, from the checkout's root: {block name: its rendering from the reports folder}} (render.reports merges these)
BLOCKS: dict[str, dict[str, Callable[[Path], str]]] = {
    "README.md": {"track-summary": readme_summary},
    "reports/tasks/README.md": {
        "seeds-intro": seeds_intro, "seeds-show": seeds_show, "heads": where_heads_look, "seed-16": seed_16,
        "anchor": anchor, "kazemnejad": beside_kazemnejad, "profile": profile, "retrained": retrained,
        "context": context_intro, "self-extend": self_extend, "rerope": rerope, "leaky-rerope": leaky_rerope,
        "dca": dca, "sinks": sinks, "logn": logn,
        "each-step": each_step, "search-status": search_status, "search-nope": search_nope,
        "fewer-steps": fewer_steps, "recipe": recipe,
        "every-method": every_method}}
