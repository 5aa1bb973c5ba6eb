"""Pictures for learners: how RoPE turns a vector, what PI / NTK / YaRN do to its frequencies, what
ALiBi adds to the attention scores, and why a model without positions cannot tell order.

    python visualize.py --out studies/visualize

Everything is computed with the repo's own functions (model/rope.py, model/positions.py, model/gpt.py),
so the pictures show what the models actually do. It takes a few seconds on a CPU.
"""
from __future__ import annotations

import argparse
import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display on servers and in tests
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import SymLogNorm  # noqa: E402

from config import ModelConfig, PositionConfig, ScalingConfig  # noqa: E402
from model.gpt import GPT  # noqa: E402
from model.positions import ENCODINGS, alibi_slopes  # noqa: E402
from model.rope import apply_rope, rope_angles, rope_frequencies, yarn_correction_range  # noqa: E402

D, THETA, L, S = 64, 10000.0, 256, 4  # head dim, RoPE base, training length, scaling factor


def caption(fig, text: str) -> None:
    """A caption under the plots, wrapped to the figure's width (about 12 characters per inch)."""
    fig.text(0.5, 0.012, textwrap.fill(text, int(fig.get_figwidth() * 12)), ha="center", va="bottom",
             fontsize=9.5)


def rope_rotation(path: Path) -> None:
    """One 2-D vector in a fast, a slow and the slowest pair, rotated by RoPE at positions 0..3."""
    inv_freq, factor = rope_frequencies(D, THETA)
    positions = torch.arange(4)
    cos, sin = rope_angles(positions, inv_freq, factor)  # (4, D/2)
    start = torch.tensor([math.cos(0.35), math.sin(0.35)])
    x = start.repeat(D // 2).expand(len(positions), D)  # the same vector in every pair, at every position
    rotated = apply_rope(x, cos, sin).unflatten(-1, (-1, 2))  # (4, D/2, 2)

    pairs = (0, 8, D // 2 - 1)
    colors = plt.cm.viridis([0.0, 0.3, 0.6, 0.85])
    fig, axes = plt.subplots(1, len(pairs), figsize=(13, 4.9))
    circle = torch.linspace(0, 2 * math.pi, 200)
    for ax, i in zip(axes, pairs):
        ax.plot(circle.cos(), circle.sin(), color="0.8", lw=1)
        ax.axhline(0, color="0.9", lw=0.8, zorder=0)
        ax.axvline(0, color="0.9", lw=0.8, zorder=0)
        for m in positions.tolist():
            u, v = rotated[m, i].tolist()
            ax.annotate("", xy=(u, v), xytext=(0, 0),
                        arrowprops=dict(arrowstyle="-|>", color=colors[m], lw=2, mutation_scale=14))
            ax.plot([], [], color=colors[m], lw=2, label=f"position m={m}")  # legend entry for the arrow
            if i == 0:  # the other pairs turn too little for separate labels
                ax.text(1.17 * u, 1.17 * v, f"m={m}", color=colors[m], ha="center", va="center", fontsize=9)
        ax.set(xlim=(-1.35, 1.35), ylim=(-1.35, 1.35), aspect="equal", xlabel=f"dim {2 * i}",
               ylabel=f"dim {2 * i + 1}")
        speed = inv_freq[i].item()
        kind = "fast" if i == 0 else "slowest" if i == D // 2 - 1 else "slow"
        ax.set_title(f"{kind} pair i={i}: {speed:.3g} rad per position\n"
                     f"(wavelength {2 * math.pi / speed:,.0f} positions)", fontsize=10)
    drift = 3 * inv_freq[-1].item()
    axes[-1].text(0, -0.55, f"all four arrows overlap:\nm=3 is only {drift:.4f} rad\naway from m=0",
                  ha="center", va="center", fontsize=9, color="0.3")
    axes[1].legend(loc="lower center", fontsize=9, frameon=False)
    fig.suptitle(f"RoPE rotates each pair of dimensions by position x frequency (d={D}, theta={THETA:g})")
    caption(fig, "The same query vector at positions m = 0..3. The fast pair turns a whole radian per "
            "token and encodes fine order; the slowest pair barely moves, so it carries coarse, long-range "
            "position (RoFormer, arXiv 2104.09864).")
    fig.subplots_adjust(left=0.05, right=0.98, top=0.83, bottom=0.2, wspace=0.25)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def rope_frequencies_plot(path: Path) -> None:
    """Wavelength per pair, original and under PI / NTK / YaRN at s = 4, and the ratio to the original."""

    original = rope_frequencies(D, THETA)[0]
    methods = {
        "original RoPE": (original, dict(color="black", lw=2.2)),
        f"PI (linear), s={S}": (rope_frequencies(D, THETA, ScalingConfig("linear", S, L))[0],
                                dict(color="tab:blue", ls="--")),
        f"NTK-aware, s={S}": (rope_frequencies(D, THETA, ScalingConfig("ntk", S, L))[0],
                              dict(color="tab:orange", ls="-.")),
        f"YaRN, s={S}": (rope_frequencies(D, THETA, ScalingConfig("yarn", S, L))[0],
                         dict(color="tab:green", marker="o", ms=3.5)),
    }
    low, high = yarn_correction_range(D, THETA, L, 32, 1)
    pairs = torch.arange(D // 2)

    fig, (ax_w, ax_r) = plt.subplots(1, 2, figsize=(13.5, 5.4))
    for ax in (ax_w, ax_r):
        ax.axvspan(low, high, color="tab:green", alpha=0.1, lw=0,
                   label=f"YaRN ramp (pairs {low}..{high})" if ax is ax_w else None)
        ax.set_xlabel("pair index i (dims 2i, 2i+1)")
        ax.set_xlim(-0.5, D // 2 - 0.5)
    for label, (inv, style) in methods.items():
        ax_w.plot(pairs, 2 * math.pi / inv, label=label, **style)
        ax_r.plot(pairs, inv / original, label=label, **style)
    ax_w.axhline(L, color="tab:red", lw=1.2)
    ax_w.text(0.3, L * 1.25, f"training length L={L}", color="tab:red", fontsize=9)
    ax_w.axhline(S * L, color="tab:red", lw=1, ls=":")
    ax_w.text(0.3, S * L * 1.25, f"target length sL={S * L}", color="tab:red", fontsize=9)
    ax_w.set(yscale="log", ylabel="wavelength 2*pi / inv_freq  (positions)",
             title="Wavelength per pair (above the red line: never a full turn within L)")
    ax_w.legend(loc="lower right", fontsize=9)
    ax_r.axhline(1 / S, color="0.6", lw=0.8, ls=":")
    ax_r.set(ylabel="scaled / original frequency", ylim=(0, 1.08), yticks=[0, 1 / S, 0.5, 0.75, 1],
             yticklabels=["0", f"1/s = {1 / S:g}", "0.5", "0.75", "1"],
             title="Scaled / original frequency per pair (1 = kept, 1/s = interpolated)")
    fig.suptitle(f"RoPE scaling from L={L} to {S * L} tokens (d={D}, theta={THETA:g})")
    turns = L * original / (2 * math.pi)  # full turns each pair makes within the training length
    caption(fig, "PI (arXiv 2306.15595) divides every frequency by s. NTK-aware scaling raises the base: "
            "the fastest pair keeps its frequency, the slowest is divided by s. YaRN (arXiv 2309.00071) "
            "keeps pairs that turn more than 32 times within L, divides those turning less than once by s, "
            f"and ramps in between. At L={L} only pair 0 turns more than 32 times ({turns[0]:.0f}; pair 1: "
            f"{turns[1]:.0f}), so the ramp starts at pair 0.")
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def alibi_bias(path: Path, n_heads: int = 8, T: int = 32) -> None:
    """The ALiBi bias -slope_h * (i - j) per head, the causal (future) half left blank."""
    slopes = alibi_slopes(n_heads)
    distance = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).float()  # (T, T): query i, key j
    bias = -slopes[:, None, None] * distance  # (H, T, T)
    bias = bias.masked_fill(distance < 0, float("nan"))  # NaN draws as blank: the causal mask

    fig, axes = plt.subplots(2, n_heads // 2, figsize=(13, 7.2), sharex=True, sharey=True)
    fig.subplots_adjust(left=0.06, right=0.86, top=0.86, bottom=0.15, hspace=0.4, wspace=0.12)
    # Slopes span 1/2 .. 1/256, so a linear colour scale would paint the gentle heads one flat colour.
    norm = SymLogNorm(linthresh=0.01, vmin=bias[~bias.isnan()].min().item(), vmax=0)
    for h, ax in enumerate(axes.flat):
        image = ax.imshow(bias[h], cmap="magma", norm=norm)
        ax.set_title(f"head {h + 1}: slope 1/{1 / slopes[h].item():g}\n"
                     f"bias at distance {T - 1}: {-slopes[h].item() * (T - 1):.3g}", fontsize=10)
        if h % (n_heads // 2) == 0:
            ax.set_ylabel("query position i")
        if h >= n_heads // 2:
            ax.set_xlabel("key position j")
    bar = fig.colorbar(image, cax=fig.add_axes((0.89, 0.2, 0.015, 0.63)))
    bar.set_ticks([0, -0.01, -0.1, -1, -10])
    bar.set_ticklabels(["0", "-0.01", "-0.1", "-1", "-10"])
    bar.set_label("bias added to the score q_i . k_j  (symmetric log scale)")
    fig.suptitle(f"ALiBi: each head adds -slope x (i - j) to its attention scores "
                 f"({n_heads} heads, {T} positions)")
    caption(fig, "Steep heads (top left) penalise distant keys hard and look locally; gentle heads "
            "(bottom right) barely penalise distance and see far. Blank: future keys, removed by the causal "
            "mask. No position is added to the tokens (Press et al., arXiv 2108.12409).")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def permutation_differences(seed: int = 0) -> dict[str, float]:
    """L2 distance between the last-position logits for [A, B, C, Q] and [C, B, A, Q], per encoding.

    A 1-layer random-init GPT per encoding, the same seed for all. Without positions (NoPE) causal
    attention at Q sees the set {A, B, C, Q}, so only float rounding can tell the two apart; in
    float64 that rounding is ~1e-16, far below the other encodings' differences.
    """
    A, B, C, Q = 1, 2, 3, 4
    forward, reverse = torch.tensor([[A, B, C, Q]]), torch.tensor([[C, B, A, Q]])
    out = {}
    for name in ENCODINGS:
        cfg = ModelConfig(vocab_size=8, d_model=32, n_layers=1, n_heads=4, n_kv_heads=2, max_seq_len=8,
                          position=PositionConfig(type=name))
        torch.manual_seed(seed)
        model = GPT(cfg).double().eval()
        with torch.no_grad():
            a = model(forward, last_only=True)[0][0, -1]
            b = model(reverse, last_only=True)[0][0, -1]
        out[name] = (a - b).norm().item()
    return out


def permutation_plot(path: Path, diffs: dict[str, float]) -> None:
    names = list(diffs)
    floor = 1e-18  # log axis: a zero difference is drawn down here and labelled
    fig, ax = plt.subplots(figsize=(9, 5.4))
    colors = ["0.6" if diffs[n] < 1e-12 else "tab:blue" for n in names]
    ax.bar(names, [diffs[n] for n in names], color=colors, bottom=floor)  # a zero draws no bar
    for i, n in enumerate(names):
        label = "0 (exactly)" if diffs[n] == 0 else f"{diffs[n]:.1e}"
        ax.text(i, max(diffs[n], floor) * 2, label, ha="center", va="bottom", fontsize=10)
    ax.set(yscale="log", ylim=(floor, 1),
           xlabel="positional encoding (1-layer GPT, random init, same seed, float64)",
           ylabel="|| logits([A,B,C,Q]) - logits([C,B,A,Q]) ||  at Q",
           title="Can the model tell [A, B, C] + Q from [C, B, A] + Q?")
    caption(fig, "Every encoding but NoPE gives a different output for the reversed context. NoPE's "
            "difference is zero up to float rounding: causal attention alone sees a set, not a sequence, at "
            "the last position. The values are small because attention starts out nearly uniform.")
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/visualize"), help="folder for the PNGs")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    diffs = permutation_differences()
    print("permutation demo, ||out([A,B,C,Q]) - out([C,B,A,Q])|| at Q:")
    for name, value in diffs.items():
        print(f"  {name:<11} {value:.3e}")
    written = []
    for name, draw in [("rope_rotation", rope_rotation), ("rope_frequencies", rope_frequencies_plot),
                       ("alibi_bias", alibi_bias),
                       ("permutation", lambda path: permutation_plot(path, diffs))]:
        path = args.out / f"{name}.png"
        draw(path)
        written.append(path)
        print(f"wrote {path}")
    return written


if __name__ == "__main__":
    main()
