"""The GPU speed prose of reports/bench/README.md is rendered from the committed measurements in reports/bench/gpu by
render/bench_report.py: every number, each comparative sentence under its predicate over the measurements
(tests/test_rendered.py regenerates the page and fails on any difference). What stays here: the top-level README's
sentences, which quote the page."""
from pathlib import Path

from conftest import prose, says
from render.bench_report import Gpu

ROOT = Path(__file__).resolve().parents[1]
README = prose(ROOT / "README.md")
GPU = Gpu(ROOT / "reports")


def test_the_readme_quotes_the_h100_measurements():
    p = GPU.profile
    [at_32x] = [e for e in GPU.bench["rows"][0]["eval"] if e["multiple"] == 32]
    assert max(abs(1 - r) for r in GPU.now) <= 0.003  # "the same after three evaluations"
    says(README, f"{p['tokens_per_s']:,.0f} tokens/s, {100 * p['mfu']:.1f}% MFU, the same after three evaluations",
         f"ALiBi through FlexAttention at {100 * GPU.alibi_share:.1f}% of RoPE",
         f"**{GPU.peer['peer']['ratio']:.2f}x** transformers' Llama", f"evaluation at 32x L in "
         f"{at_32x['peak_mib'] / 1000:.1f} GB", f"perplexity {GPU.minimind()[0]}",
         f"{GPU.decoding[0]:,.0f} tokens/s (the last 64 tokens of 1,024)")


def test_the_readme_quotes_the_h200_measurements():
    low, high = (round(100 * f(GPU.biases.values())) for f in (min, max))
    says(README, f"On one H200 that decoding is **{GPU.peer_decoding['ratio']:.2f}x** transformers' compiled",
         f"t5, kerple and FIRE train at {low}-{high}% of RoPE")

