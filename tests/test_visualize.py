"""eval/visualize.py: the pictures are written, and the permutation demo says what it should."""
from eval.visualize import main, permutation_differences
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
