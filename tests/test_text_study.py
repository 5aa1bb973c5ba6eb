"""What the text study's pages say about its recipe and settings that its rows alone cannot check (studies/text: the
claims about its rows are studies/text/test_claims.py): the front page's count of a seed's runs,
KERPLE's clamp (studies/text/history.md) and the context-method rows' settings."""
import re
from pathlib import Path

import torch
from conftest import context_defaults, prose, says

from config import ModelConfig, PositionConfig
from eval.results.plots import read_results
from model.positions import Kerple

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "studies" / "text"
README = prose(ROOT / "README.md")


def test_readme_one_seed_is_the_makefiles_runs():
    """The front page's count of a seed's runs, from studies/text/text.mk's lists (its RUNS)."""
    lists = dict(re.findall(r"^([A-Z_]+) := (.+)$", (STUDY / "text.mk").read_text(), re.M))
    n = {name: len(lists[name].split()) for name in ("ENCODINGS", "VARIANTS", "EXTENSIONS", "POSITION_RUNS")}
    assert "drope" in lists["POSITION_RUNS"].split()
    says(README, f"one seed: {sum(n.values())} runs ({n['ENCODINGS']} encodings, {n['VARIANTS']} RoPE variants, "
                 f"{n['EXTENSIONS']} fine-tunes, {n['POSITION_RUNS'] - 1} with training positions, DroPE)")


def test_kerple_clamp_stops_the_gradient_below_its_floor():
    says(prose(STUDY / "history.md"), "clamps r1 and r2 at a small floor in its forward pass (`model/positions.py`), and "
                                      "a clamp passes no gradient below its bound")
    kerple = Kerple(ModelConfig(n_heads=2, position=PositionConfig(type="kerple")))
    with torch.no_grad():
        kerple.r1.copy_(torch.tensor([0.005, 0.5]))
        kerple.r2.copy_(torch.tensor([0.005, 0.5]))
    kerple.distance_bias(torch.arange(8)).sum().backward()
    assert kerple.r1.grad[0] == kerple.r2.grad[0] == 0 and kerple.r1.grad[1] != 0 and kerple.r2.grad[1] != 0


def test_context_rows_are_at_the_methods_defaults():
    """make study-context's rows: each method at model/context.py's defaults for L, on RoPE, ALiBi and T5 of seeds
    1-3 at every length, no scaling (the study page says so and compares each method with `none`)."""
    says(prose(STUDY / "README.md"), 'make -j2 study-context THREADS=1 SEED_NUMBERS="1 2 3"')
    for method in ("none", "self-extend", "rerope", "leaky-rerope", "dca", "sinks", "logn"):
        rows = read_results(STUDY / "context" / method / "results.json")
        assert {(r["scaling"], r["factor_rule"], r["tokens"]) for r in rows} == {(method, None, 32_768)}
        if method != "none":
            assert {str(r["context"]) for r in rows} == {str({"type": method, **context_defaults(method)})}
        assert {(r["run"], r["seed"], r["length"]) for r in rows} == {
            (run, s, n) for run in ("rope", "alibi", "t5") for s in (1, 2, 3) for n in (128, 256, 512, 1024, 2048)}
