"""What the text study's pages say that their rows alone cannot check (README.md and reports/extrapolation/README.md).

The measured paragraphs of both pages are rendered by `make reports` from their rows (render/text_study/ and the
other page modules: each comparative sentence written only while its predicate holds), and tests/test_rendered.py fails
on any difference. Here: README.md's headline claims as rendered blocks (and one made false by its rows, stopping the
rendering), and what the pages say that rows alone cannot check: how many runs a seed is, the recipe's parameter count,
Kerple's clamp, Self-Extend's distances and the context rows' settings.
"""
import functools
import re
from pathlib import Path

import pytest
import torch
from conftest import context_defaults, prose, says

from config import Config, ModelConfig, PositionConfig, load_config
from render.plots import read_results
from model.gpt import GPT
from model.positions import Kerple

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "extrapolation"
ROWS = read_results(REPORT / "results.json")
SEEDS = (1, 2, 3)
L, X2, X4, X8, X16 = 128, 256, 512, 1024, 2048

README, STUDY = prose(ROOT / "README.md"), prose(REPORT / "README.md")


# --- README.md: the text study's paragraphs ---------------------------------------------------------


def test_readme_one_seed_is_the_makefiles_runs():
    """The README's count of a seed's runs, from make/study.mk's lists (its RUNS)."""
    lists = dict(re.findall(r"^([A-Z_]+) := (.+)$", (ROOT / "make" / "study.mk").read_text(), re.M))
    n = {name: len(lists[name].split()) for name in ("ENCODINGS", "VARIANTS", "EXTENSIONS", "POSITION_RUNS")}
    assert "drope" in lists["POSITION_RUNS"].split()
    says(README, f"one seed: {sum(n.values())} runs ({n['ENCODINGS']} encodings, {n['VARIANTS']} RoPE variants, "
                 f"{n['EXTENSIONS']} fine-tunes, {n['POSITION_RUNS'] - 1} with training positions, DroPE)")


def test_study_recipe_1_31m_parameters_and_1_64m_tokens():
    says(README, "(`configs/study.yaml`: 1.31M parameters, L = 128, 1.64M tokens)")
    says(STUDY, "(1.31M parameters, L = 128, 400 steps of 32 x 128 tokens = 1.64M tokens; `learned` has 1.2% more "
                "parameters for its table)")

    def study(position: str) -> Config:
        return load_config(Config, ROOT / "configs" / "study.yaml", [f"model.position.type={position}"]).resolve()

    def parameters(position: str) -> int:
        return sum(p.numel() for p in GPT(study(position).model).parameters())

    cfg = study("rope")
    tokens = cfg.train.max_steps * cfg.train.batch_size * cfg.model.max_seq_len
    assert (cfg.model.max_seq_len, cfg.train.max_steps, cfg.train.batch_size) == (L, 400, 32)
    assert (f"{parameters('rope') / 1e6:.2f}", f"{tokens / 1e6:.2f}") == ("1.31", "1.64")
    assert f"{100 * (parameters('learned') / parameters('rope') - 1):.1f}" == "1.2"


# --- reports/extrapolation/README.md: what its rows alone cannot check ------------------------------

def test_every_cell_scores_32768_tokens():
    says(STUDY, "(32,768 scored tokens per cell)")
    assert {r["tokens"] for r in ROWS if r["ppl"] is not None} == {32_768}


def test_kerple_caveat_its_clamp_stops_the_gradient_below_0_01():
    says(STUDY, "Caveat: `Kerple` clamps r1 and r2 at 0.01 in its forward pass (`model/positions.py`), and a clamp "
                "passes no gradient below its bound, so a parameter that falls under 0.01 stops learning")
    kerple = Kerple(ModelConfig(n_heads=2, position=PositionConfig(type="kerple")))
    with torch.no_grad():
        kerple.r1.copy_(torch.tensor([0.005, 0.5]))
        kerple.r2.copy_(torch.tensor([0.005, 0.5]))
    kerple.distance_bias(torch.arange(8)).sum().backward()
    assert kerple.r1.grad[0] == kerple.r2.grad[0] == 0 and kerple.r1.grad[1] != 0 and kerple.r2.grad[1] != 0


# --- training-free context methods in the text study (reports/extrapolation/context) ---------------------

TEXT_LENGTHS = (L, X2, X4, X8, X16)
TEXT_METHODS = ("self-extend", "rerope", "leaky-rerope", "dca", "sinks", "logn")
CONTEXT_RUNS = ("rope", "alibi", "t5")


@functools.cache
def text_context() -> dict[tuple, float]:
    """{(method, run, seed, length): ppl} from make study-context's rows: `none` and each method at its defaults,
    on RoPE, ALiBi and T5 of seeds 1-3, every length, no scaling."""
    cells = {}
    for method in ("none", *TEXT_METHODS):
        rows = read_results(REPORT / "context" / method / "results.json")
        for r in rows:
            assert r["scaling"] == ("none" if method == "none" else method) and r["factor_rule"] is None
            assert r["tokens"] == 32_768
            if method != "none":
                assert r["context"] == {"type": method, **context_defaults(method)}
            cells[(method, r["run"], r["seed"], r["length"])] = r["ppl"]
        assert {k[1:] for k in cells if k[0] == method} == {(run, s, n) for run in CONTEXT_RUNS for s in SEEDS
                                                            for n in TEXT_LENGTHS}
    return cells


def test_text_context_rows_are_at_the_methods_defaults():
    """The rows the page renders the methods' settings from were measured at model/context.py's defaults for L."""
    says(STUDY, 'make -j2 study-context THREADS=1 SEED_NUMBERS="1 2 3"')
    text_context()


def test_self_extend_shows_the_first_token_where_the_page_says():
    """The page renders Self-Extend's shown distance from its formula (render/text_study/context.py); the model agrees."""
    from model.context import CONTEXT_METHODS
    method = CONTEXT_METHODS["self-extend"](**context_defaults("self-extend"))
    shown = [int(method.distance(torch.tensor([n - 1]), torch.tensor([0]))[0, 0]) for n in (X4, X16)]
    says(STUDY, f"the first token at {shown[0]} at 512 tokens (near L), at {shown[1]} at 2,048.")



# --- README.md's measured paragraphs: rendered from the rows, each headline claim under its predicate ------------

def test_the_readme_says_what_its_rows_support():
    """Each of README.md's measured paragraphs is its block rendered from the committed rows (render.reports BLOCKS);
    a headline sentence whose predicate fails would have stopped the rendering."""
    from render import reports
    page = (ROOT / "README.md").read_text()
    blocks = reports.BLOCKS["README.md"]
    assert {"ppl-headline", "study-summary", "gpu-summary", "track-summary", "speed-summary"} <= set(blocks)
    for name, render in blocks.items():
        assert f"<!-- rendered: {name} -->\n{render(ROOT / 'reports')}\n<!-- /rendered -->" in page, name


def test_a_readme_headline_the_rows_stop_supporting_stops_the_rendering(tmp_path):
    import json
    import shutil
    from render.prose import FalseClaim
    from render.text_study import readme_summary
    folder = tmp_path / "extrapolation"
    shutil.copytree(REPORT, folder)
    rows = json.loads((folder / "results.json").read_text())
    for r in rows:
        if (r["run"], r["scaling"], r["length"]) == ("alibi", "none", X16):
            r["ppl"] *= 1.2  # ALiBi no longer flat to 16x
    (folder / "results.json").write_text(json.dumps(rows))
    with pytest.raises(FalseClaim, match="ALiBi stays flat to 16x"):
        readme_summary(folder)
