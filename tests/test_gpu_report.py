"""The GPU study's page (reports/extrapolation-gpu/README.md) is rendered from its committed rows by
render/gpu_study.py: every number, range and per-seed list, each comparative sentence under its predicate over the
rows (tests/test_rendered.py regenerates the page and fails on any difference). What stays here: the top-level
README's paragraph, which quotes the page, and the CPU study page's sentence on the GPU seeds' gap at L."""
from pathlib import Path

from render.gpu_study import Study, span

ROOT = Path(__file__).resolve().parents[1]
PAGE = " ".join((ROOT / "reports" / "extrapolation-gpu" / "README.md").read_text().split())
README = " ".join((ROOT / "README.md").read_text().split())
GPU = Study(ROOT / "reports")
ppl, SEEDS, L = GPU.ppl, GPU.seeds, GPU.L


def says(*fragments: str, page: str = PAGE) -> None:
    for fragment in fragments:
        assert " ".join(fragment.split()) in page, f"the sentence changed or is gone: {fragment!r}"


def test_readme_paragraph():
    says("**On a GPU** ([report](reports/extrapolation-gpu/README.md), seeds 1-4): 26M parameters, L = 256, 22.9M "
         "tokens a run (where validation loss came within 1% of its lowest; the lowest came later). The ALiBi paper's pattern, in every seed: ALiBi falls "
         "at every longer length, while at 16x sinusoidal reaches 3.51-4.96x its 1x perplexity and unscaled RoPE "
         "3.57-4.06x (the two swap places in seed 4). No model copies (a first copy lowers the loss by at most 0.129 "
         "nats).", "a GPU study seed in 282-369 s.", page=README)
    # the same numbers in the page's sentences, each rendered from the rows under its predicate (render/gpu_study.py)
    says("**Four seeds (1, 2, 3, 4)**", "lowest at step 800 (4.066) and sinusoidal's at step 900",
         "RoPE is within 1% of its lowest from step 600, sinusoidal from step 700", "**700 steps, 22.9M tokens",
         "its perplexity falls at every longer length in every seed", "and 3.51-4.96x at 16x",
         "ends at 3.57-4.06x at 16x", "in seed 4 its 16x ratio passes sinusoidal's", "by at most 0.129 nats",
         "282 s for the five runs from scratch", "358 s and 334 s", "369 s, the shards built first")


def test_cpu_report_sentence_on_the_gap_at_L():
    says("there, at L, sinusoidal is 16-17% and learned 18-22% above RoPE, ALiBi 0.2-3.8%.",
         page=" ".join((ROOT / "reports" / "extrapolation" / "README.md").read_text().split()))
    above = {run: [100 * (ppl(run, L, s) / ppl("rope", L, s) - 1) for s in SEEDS] for run in ("sinusoidal", "learned", "alibi")}
    assert span(above["sinusoidal"], "{:.0f}") == "16-17" and span(above["learned"], "{:.0f}") == "18-22"
    assert span(above["alibi"], "{:.1f}") == "0.2-3.8"
