"""eval.ruler, RULER's synthetic tasks generated natively: prompts of exactly the length asked with their needles at
the depth asked and their answers in them, RULER's string_match_all, the effective-length rule, the command's report,
and bad inputs refused in one line."""
import json
from collections import Counter

import pytest
import yaml
from conftest import copy_run

from checkpoint import load_tokenizer
from eval import ruler
from eval.results.ruler import effective_lengths, markdown, mean_by_length, scores
from eval.ruler import BUDGET, NIAH, TASKS, Tasks, string_match_all


@pytest.fixture(scope="module")
def gen(tiny_run):
    tok = load_tokenizer(tiny_run)
    book = tok.encode("It was the best of times, it was the worst of times, it was the age of wisdom. " * 3)
    return Tasks(tok, seed=0, book=book), tok


@pytest.mark.parametrize("length", [400, 517])
def test_every_prompt_has_the_length_asked_its_needles_at_their_depth_and_its_answers(gen, length):
    tasks, tok = gen
    for task in TASKS:
        for depth in ((0, 0.5, 1) if task in NIAH else (None,)):
            for trial in range(3):
                s = tasks.sample(task, trial, length, depth)
                assert len(s.prompt) + BUDGET[task] == length, (task, depth)
                assert s == tasks.sample(task, trial, length, depth)  # a pure function of its arguments
                text = tok.decode(s.prompt)
                assert all(e in text for e in s.expected), (task, s.expected)
                for at, needle in s.needles:
                    assert s.prompt[at:at + len(needle)] == needle
                if task in NIAH:  # the needles together, after whole units of haystack: depth of those there are
                    head = len(tasks.bos + tok.encode(ruler.OPENING))
                    first = s.needles[0][0] - head
                    fill = len(s.prompt) - head - sum(len(n) for _, n in s.needles) - s.question
                    unit = 1 if task == "niah_single_book" else len(tasks.filler)
                    assert first == round(depth * (fill // unit)) * unit
                    together = s.needles[-1][0] + len(s.needles[-1][1]) - s.needles[0][0]
                    assert together == sum(len(n) for _, n in s.needles)
                    n = 1 if task.startswith("niah_single") else ruler.N_NEEDLES
                    assert len(s.needles) == n
                    assert len(s.expected) == (n if task in ("niah_multivalue", "niah_multiquery") else 1)
        if task in ("cwe", "fwe"):  # the words listed, after the opening, before the question
            opening = ruler.CWE_OPENING if task == "cwe" else ruler.FWE_OPENING
            listed = tok.decode(s.prompt[len(tasks.bos + tok.encode(opening)):-s.question]).split()
            counts = Counter(w for w in listed if w in tasks.pieces)
            if task == "cwe":
                assert min(counts[w] for w in s.expected) > max(c for w, c in counts.items() if w not in s.expected)
            else:
                assert [w for w, _ in counts.most_common(3)] == s.expected


def test_depth_moves_the_needle_through_the_haystack(gen):
    tasks, _ = gen
    at = [tasks.sample("niah_single_noise", 0, 517, d).needles[0][0] for d in (0, 0.5, 1)]
    assert at[0] < at[1] < at[2]


def test_string_match_all_on_hand_made_answers():
    assert string_match_all(" 1234567 and 7654321", ["1234567", "7654321"]) == 1.0
    assert string_match_all(" 1234567, then nothing", ["1234567", "7654321"]) == 0.5
    assert string_match_all(" no idea", ["1234567", "7654321"]) == 0.0
    assert string_match_all(" APPLE pear", ["apple"]) == 1.0  # case-insensitive, as RULER's


def rows(run, values: dict[int, list[float]]):
    return [{"run": run, "seed": 0, "scaling": "none", "task": task, "length": n, "depth": None, "value": v,
             "trials": 1, "scores": [v / 100], "found": 0, "expected": 2}
            for n, vs in values.items() for task, v in zip(("vt", "cwe"), vs)]


def test_effective_lengths_on_hand_made_rows():
    # means: 95 at 128, 86 at 256, 70 at 512, 88 at 1024 (the longest at or above a threshold counts)
    made = rows("a", {128: [100, 90], 256: [86, 86], 512: [60, 80], 1024: [88, 88]})
    means = mean_by_length(scores(made)[("a", "none")])
    assert means == pytest.approx({128: 95, 256: 86, 512: 70, 1024: 88})
    assert effective_lengths(means) == (1024, 1024)
    weak = mean_by_length(scores(rows("b", {128: [40, 40], 256: [35, 35], 512: [30, 30]}))[("b", "none")])
    assert effective_lengths(weak) == (None, 256)  # 35 >= 0.856 * 40 = 34.24 > 30
    zero = mean_by_length(scores(rows("c", {128: [0, 0], 256: [0, 0]}))[("c", "none")])
    assert effective_lengths(zero) == (None, None)
    page = markdown(made + rows("b", {128: [40, 40], 256: [35, 35], 512: [30, 30]}))
    assert "| a | none | 95.0 | 1,024 | 1,024 |" in page and "| b | none | 40.0 | none | 256 |" in page
    assert "effective length (>= 85.6)" in page and "(>= 85.6% of shortest)" in page


def test_a_default_invocation_writes_the_report(tiny_run, tmp_path):
    out = tmp_path / "ruler"
    got = ruler.main([str(tiny_run), "--lengths", "400", "--trials", "1", "--depths", "0.5", "--device", "cpu",
                      "--out", str(out)])
    assert {r["task"] for r in got} == set(TASKS) and all(r["value"] is not None for r in got)
    assert json.loads((out / "results.json").read_text()) == got
    page = (out / "results.md").read_text()
    assert "| niah_single_noise |" in page and "| mean |" in page and "## Effective length" in page
    again = ruler.main([str(tiny_run), "--lengths", "400", "--trials", "1", "--depths", "0.5", "--device", "cpu",
                        "--out", str(out), "--resume", "--tasks", "vt"])
    assert len(again) == len(got)  # every row was there: none measured again


def test_a_scaling_at_s_1_repeats_the_unscaled_rows_it_is(tiny_run, tmp_path):
    run = copy_run(tiny_run, tmp_path, "rope")  # told it was trained at 512 tokens: a prompt of 400 fits in L
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["model"]["max_seq_len"] = 512
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    common = [str(run), "--lengths", "400", "--trials", "1", "--depths", "0.5", "--tasks", "niah_single_noise,vt",
              "--device", "cpu", "--out", str(tmp_path / "out")]
    unscaled = {r["task"]: r for r in ruler.main([*common, "--scaling", "none"])}
    rows = ruler.main([*common, "--scaling", "none,yarn,dynamic", "--resume"])  # within L both are the same model
    for method in ("yarn", "dynamic"):
        same = {r["task"]: r for r in rows if r["scaling"] == method}
        assert same.keys() == unscaled.keys() and all(r["same_as"] == "none" and "seconds" not in r
                                                      for r in same.values())
        assert all(same[t]["scores"] == unscaled[t]["scores"] for t in same)
    assert "| vt | = none |" in (tmp_path / "out" / "results.md").read_text()
    past_L = ruler.main([*common[:2], "600", *common[3:], "--scaling", "none,dynamic", "--tasks", "vt", "--resume"])
    assert all("seconds" in r and "same_as" not in r for r in past_L if r["length"] == 600)  # past L: another model


def bad(argv, capsys, expected):
    with pytest.raises(SystemExit) as exit_:
        ruler.main(argv)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert exit_.value.code == 2 and len(err) == 1 and expected in err[0], err


def test_bad_inputs_are_one_line_and_exit_2(tiny_run, tmp_path, capsys):
    common = ["--device", "cpu", "--trials", "1", "--out", str(tmp_path / "o")]
    bad([str(tiny_run), "--tasks", "qa_1", *common], capsys, "unknown 'qa_1'")
    bad([str(tiny_run), "--lengths", "40", "--tasks", "vt", *common], capsys, "too short")
    task_run = copy_run(tiny_run, tmp_path, "on_tasks")
    config = yaml.safe_load((task_run / "config.yaml").read_text())
    config["data"]["source"] = "tasks"
    (task_run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    bad([str(task_run), *common], capsys, "eval.tasks")


def test_greedy_through_the_cache_is_full_forward_argmax(tiny_run):
    import torch
    from checkpoint import load_model
    model = load_model(tiny_run, device="cpu")
    prompt = list(range(5, 45))
    got = ruler.greedy(model, prompt, 4, torch.device("cpu"))
    tokens = list(prompt)
    with torch.inference_mode():
        for _ in range(4):
            logits, _ = model(torch.tensor([tokens]))
            tokens.append(int(logits[0, -1].argmax()))
    assert got == tokens[len(prompt):]


@pytest.mark.parametrize("method", ["dynamic", "dynamic-yarn"])
def test_a_dynamic_scaling_decodes_past_L_as_one_token_steps(tiny_run, method):
    """Past L a dynamic scaling gives each token the frequencies of its own length: the prompt read in one pass to L
    and in chunks after it gives the logits, and greedy the answer, of the prompt fed one token at a time; one pass
    over it all, every token at the prompt's length, does not."""
    import torch
    from checkpoint import load_model
    from config import ScalingConfig
    from eval.harness import read_cached
    from model.attention import KVCache
    L = load_model(tiny_run, device="cpu").cfg.max_seq_len
    model = load_model(tiny_run, device="cpu", scaling=ScalingConfig(method, 1.0 if method == "dynamic" else None, L))
    prompt = [(7 * i) % 500 + 3 for i in range(L + 45)]  # past L by more than two chunks
    cache, tokens, stepped = KVCache(model.cfg.n_layers), list(prompt), []
    with torch.inference_mode():
        for t in prompt:
            stepped.append(model(torch.tensor([[t]]), cache=cache)[0][0, -1])
        for _ in range(3):
            tokens.append(int(model(torch.tensor([tokens[-1:]]), cache=cache)[0][0, -1].argmax()))
        whole = model(torch.tensor([prompt]))[0][0]
    stepped = torch.stack(stepped)
    torch.testing.assert_close(read_cached(model, prompt, KVCache(model.cfg.n_layers), torch.device("cpu"), False),
                               stepped, atol=1e-5, rtol=1e-5)
    assert (whole - stepped)[L:].abs().max() > 1e-4
    assert ruler.greedy(model, prompt, 3, torch.device("cpu")) == tokens[len(prompt):]


@pytest.mark.parametrize("method", [None, "dynamic"])
def test_trials_that_share_a_prefix_read_it_once_and_answer_as_alone(tiny_run, method, monkeypatch):
    """Prompts with a common prefix (a needle's haystack) continue one read of it, rewound after each, and greedy
    gives each the answer it gives it alone, past L under a dynamic scaling too; the prefix is read once."""
    import torch
    from checkpoint import load_model
    from config import ScalingConfig
    L = load_model(tiny_run, device="cpu").cfg.max_seq_len
    model = load_model(tiny_run, device="cpu", scaling=method and ScalingConfig(method, 1.0, L))
    haystack = [(7 * i) % 500 + 3 for i in range(L + 20)]  # past L: the prefix alone decodes past it
    prompts = [haystack + [11 + t, 12, 13 + 2 * t, 14] for t in range(3)]
    alone = [ruler.greedy(model, p, 3, torch.device("cpu")) for p in prompts]
    monkeypatch.setattr(ruler, "SHARED_PREFIX", 16)
    read, forward = [], model.forward
    monkeypatch.setattr(model, "forward", lambda idx, *a, **k: (read.append(idx.shape[1]), forward(idx, *a, **k))[1])
    assert list(ruler.greedy_trials(model, prompts, 3, torch.device("cpu"))) == alone
    assert sum(read) == len(haystack) + 3 * (4 + 2)  # the prefix once, then each prompt's own 4 and 2 decoded


def test_an_answer_that_holds_every_expected_string_scores_100(tiny_run, tmp_path, monkeypatch):
    monkeypatch.setattr(ruler, "greedy", lambda model, prompt, n, device, cache=None: prompt)  # holds the answers
    got = ruler.main([str(tiny_run), "--lengths", "400", "--trials", "2", "--depths", "0,1", "--device", "cpu",
                      "--tasks", "niah_single_noise,vt", "--out", str(tmp_path)])
    assert [r["value"] for r in got] == [100.0] * 3
    page = (tmp_path / "results.md").read_text()
    assert "| niah_single_noise | 100.0 [51, 100] (4/4) |" in page
    assert "| vt | 100.0 (10/10 strings, 2 trials) |" in page
    assert "| tiny | none | 100.0 | 400 | 400 |" in page


def test_a_killed_evaluation_resumes_trial_by_trial(tiny_run, tmp_path, monkeypatch):
    common = [str(tiny_run), "--lengths", "400", "--trials", "3", "--tasks", "vt,fwe", "--device", "cpu",
              "--out", str(tmp_path)]
    add, added = ruler.TrialLog.add, []

    def add_then_kill(self, *args):
        add(self, *args)
        added.append(args[3])
        if len(added) == 4:  # vt's row written, one trial of fwe logged
            raise KeyboardInterrupt
    monkeypatch.setattr(ruler.TrialLog, "add", add_then_kill)
    with pytest.raises(SystemExit):
        ruler.main(common)
    assert [r["task"] for r in json.loads((tmp_path / "results.json").read_text())] == ["vt"]
    added.clear()
    monkeypatch.setattr(ruler.TrialLog, "add", lambda self, *args: (add(self, *args), added.append(args[3])))
    rows = ruler.main([*common, "--resume"])
    assert added == [1, 2] and [r["task"] for r in rows] == ["vt", "fwe"]
    assert not (tmp_path / ruler.TRIALS).exists()


class Words:
    """A tokenizer with a token for each printable character and for each of 60 words with its leading space: digit
    tokens of their own, so values are 7-digit numbers, as with a pretrained model's tokenizer."""
    bos_id = 0
    chars = [chr(c) for c in range(32, 127)]
    words = [f" {a}{b}" for a in ("bold", "calm", "dark", "fair", "gray", "keen") for b in
             ("acre", "barn", "cove", "dune", "fern", "glen", "hill", "isle", "lake", "moor")]

    @property
    def vocab_size(self):
        return 1 + len(self.chars) + len(self.words)

    def piece(self, i):
        return "<s>" if i == 0 else (self.chars + self.words)[i - 1]

    def encode(self, text):
        out, i = [], 0
        while i < len(text):
            word = next((w for w in self.words
                         if text.startswith(w, i) and not text[i + len(w):i + len(w) + 1].isalpha()), None)
            out.append(1 + len(self.chars) + self.words.index(word) if word else 1 + self.chars.index(text[i]))
            i += len(word) if word else 1
        return out

    def decode(self, ids):
        return "".join(self.piece(i) for i in ids if i)


def test_a_tokenizer_with_digits_gets_seven_digit_values_and_exact_lengths():
    tok = Words()
    tasks = Tasks(tok, seed=3, book=tok.encode(" The river ran on past the mill and the old stone bridge."))
    assert tasks.digits and tasks.words[:60] == tuple(w[1:] for w in tok.words)  # then coded pairs of them
    for task in TASKS:
        s = tasks.sample(task, 0, 3000, 0.5 if task in NIAH else None)
        assert len(s.prompt) + BUDGET[task] == 3000 and s.prompt[0] == 0
        assert all(e in tok.decode(s.prompt) for e in s.expected)
        if task in NIAH:
            assert all(len(v) == 7 and v.isdigit() for v in s.expected)
