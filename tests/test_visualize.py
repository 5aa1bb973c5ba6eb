"""visualize.py: the pictures are written, and the permutation demo says what it should."""
import json

from visualize import main, permutation_differences
from model.positions import ENCODINGS

FIGURES = ("rope_rotation", "rope_frequencies", "alibi_bias", "permutation")


def test_main_writes_the_four_figures(tmp_path, capsys):
    out = tmp_path / "figures"
    written = main(["--out", str(out)])
    printed = capsys.readouterr().out
    assert sorted(written) == sorted(out / f"{name}.png" for name in FIGURES)
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.stat().st_size > 10_000  # a real plot, not an empty canvas
        assert str(path) in printed


def test_only_nope_is_blind_to_order():
    # Causal attention at the last position sees {A, B, C, Q} as a set unless something adds position.
    diffs = permutation_differences()
    assert set(diffs) == set(ENCODINGS) and "nope" in diffs
    assert diffs["nope"] < 1e-12  # float64 rounding at most
    for name, diff in diffs.items():
        if name != "nope":
            assert diff > 1e-6, name


def test_perplexity_plot_labels_its_log_axis_and_draws_unscaled_rope_among_the_scalings(tmp_path, monkeypatch):
    from eval.results import plots
    assert plots.log_ticks(90, 250) == [90.0, 110.0, 140.0, 170.0, 200.0, 250.0]  # 90 * (250/90)^(i/5), 2 s.f.
    figures = []
    monkeypatch.setattr(plots.plt, "close", figures.append)

    def row(position, scaling, rule, length, ppl):
        return {"run": position, "position": position, "seed": 1, "scaling": scaling, "factor_rule": rule,
                "factor": None, "train_length": 128, "length": length, "ppl": ppl, "split": "test"}
    rows = [row(p, "none", None, n, ppl) for p in ("rope", "alibi") for n, ppl in ((128, 95.0), (512, 240.0))]
    rows += [row("rope", "yarn", "length/L", n, ppl) for n, ppl in ((128, 95.0), (512, 120.0))]
    plots.plot_ppl_vs_length(rows, tmp_path / "ppl.png")
    left, right = figures[0].axes
    labels = [t.get_text() for t in left.get_yticklabels() if 95 <= t.get_position()[1] <= 240]
    assert len(labels) >= 3 and all(label.replace(",", "").isdigit() for label in labels), labels
    assert [line.get_label() for line in right.get_lines() if not line.get_label().startswith("_")][:2] == \
        ["rope (reference)", "rope: yarn (s = length/L)"]


def test_context_methods_plot_draws_a_panel_per_run_and_none_as_the_dashed_reference(tmp_path, monkeypatch):
    from eval.results import plots
    figures = []
    monkeypatch.setattr(plots.plt, "close", figures.append)
    rows = [{"run": run, "position": run, "seed": seed, "scaling": method, "train_length": 128, "length": n,
             "ppl": 100.0 + seed + n / 64, "split": "test"} for run in ("rope", "alibi") for method in ("none", "sinks", "dca") for seed in (1, 2)
            for n in (128, 512)]
    for method in ("sinks", "none"):  # one results.json a method, in any order
        folder = tmp_path / method
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps([r for r in rows if r["scaling"] == method]))
    plots.main([str(tmp_path / "sinks" / "results.json"), str(tmp_path / "none" / "results.json"), "--out", str(tmp_path)])
    assert (tmp_path / "methods_vs_length.png").stat().st_size > 1000
    plots.plot_context_methods(rows, tmp_path / "all.png")
    axes = figures[-1].axes
    assert [ax.get_title() for ax in axes] == ["rope", "alibi"]
    lines = [line for line in axes[1].get_lines() if not line.get_label().startswith("_")]
    assert [line.get_label() for line in lines] == ["none", "sinks", "dca", "training length"]
    assert lines[0].get_linestyle() == "--" and lines[0].get_color() == "black"
    assert list(lines[1].get_ydata()) == [101.5 + 2, 101.5 + 8]  # the mean of seeds 1 and 2 at 128 and 512
