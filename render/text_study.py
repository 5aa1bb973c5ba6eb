"""The measured prose of the text study (README.md's study paragraphs and reports/extrapolation/README.md), rendered by `make reports` from the committed rows: each paragraph between
<!-- rendered: NAME --> and <!-- /rendered --> lines of its page, each comparative sentence written only while its
predicate over the rows holds (render.prose)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

# {page, from the checkout's root: {block name: its rendering from the reports folder}} (render.reports merges these)
BLOCKS: dict[str, dict[str, Callable[[Path], str]]] = {}
