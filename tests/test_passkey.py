"""eval.passkey, the passkey test of Mohtashami & Jaggi as a heat map: prompts of exactly the length asked with the
key where its depth says, one shared prefix per length giving a full pass's predictions (a run and a transformers
checkpoint alike), the command's rows, resume and report, and SmolLM2 finding the key (`make smollm2`)."""
import json
from pathlib import Path

import pytest
import torch
import yaml
from conftest import copy_run

from checkpoint import load_model, load_tokenizer
from generate import generate_tokens
from eval import passkey
from eval.passkey import Prompts
from eval.results.passkey import row_key
from model.attention import KVCache

ROOT = Path(__file__).resolve().parents[1]
SMOLLM2 = ROOT / ".cache" / "smollm2" / "SmolLM2-135M-Instruct-Q4_1"  # where `make smollm2` prepares it


def full_prompt(prompts: Prompts, i: int, length: int, depth: float) -> tuple[list[int], int]:
    """Trial i's prompt up to the question's end, and where its key sentence starts."""
    at = prompts.key_at(length, depth)
    body, _ = prompts.trial(i, length, at)
    return prompts.head + prompts.filler_tokens(at) + body, len(prompts.head) + at


@pytest.mark.parametrize("length", [200, 333, 1024])
def test_a_prompt_has_the_length_asked_and_its_key_at_its_depth(tiny_run, length):
    prompts = Prompts(load_tokenizer(tiny_run), seed=0, trials=4)
    assert prompts.kind == "a word"  # the tiny run's tokenizer, trained on books, has no digit tokens
    reps = (length - prompts.fixed) // len(prompts.filler)  # whole filler repetitions that fit
    for depth in (0, 0.3, 0.5, 1):
        for i in range(4):
            tokens, key = full_prompt(prompts, i, length, depth)
            assert len(tokens) + len(prompts.answers[i]) + passkey.EXTRA_TOKENS == length  # with what it generates
            fact = prompts.facts[i]
            assert tokens[key:key + len(fact)] == fact
            before = key - len(prompts.head)
            assert before % len(prompts.filler) == 0 and before == round(depth * reps) * len(prompts.filler)
            assert tokens[-len(prompts.question):] == prompts.question
    assert len(set(map(tuple, prompts.answers))) > 1  # keys differ between trials


class Digits:  # a tokenizer with one token per character: digits are tokens of their own
    bos_id = None

    def encode(self, text):
        return [ord(c) for c in text]

    def piece(self, i):
        return chr(i)

    def decode(self, ids):
        return "".join(map(chr, ids))


def test_a_tokenizer_with_digits_gets_five_digit_keys(tiny_run):
    prompts = Prompts(Digits(), seed=0, trials=20)
    assert prompts.kind == "5 digits" and len(set(prompts.keys)) == 20
    assert all(len(k) == 5 and k.isdigit() for k in prompts.keys)
    assert prompts.answers[0] == [ord(c) for c in " " + prompts.keys[0]]


def test_a_key_is_held_when_every_digit_is_predicted_after_the_answer_before_it():
    prompts = Prompts(Digits(), seed=0, trials=4)
    a = prompts.answers  # " NNNNN": a space, then the digits
    teachers = [a[0],  # the whole answer
                [ord("t")] + a[1][1:],  # " the ..." first, every digit right after the true answer before it
                a[2][:-1] + [ord("0") + (int(prompts.keys[2][-1]) + 1) % 10],  # the last digit wrong
                a[3][:1] + [ord("x")] + a[3][2:]]  # the first digit wrong
    assert passkey.held(prompts, [([], t) for t in teachers]) == 2


def test_rows_from_before_held_get_it_from_the_trials_the_log_still_holds(tiny_run, tmp_path, monkeypatch):
    """`held` is counted as a row is measured; a row written before it was, whose trials the log still holds under
    the same keys and weights (a kill keeps them), gets it on --resume from them, measuring nothing."""
    monkeypatch.setattr(passkey, "load_tokenizer", lambda path: Digits())  # ASCII ids fit the tiny run's vocabulary
    common = [str(tiny_run), "--lengths", "512", "--depths", "0", "--trials", "2", "--scaling", "none",
              "--device", "cpu", "--out", str(tmp_path), "--resume"]  # a character a token: 512 fit the prompt
    (row,) = passkey.main(common)
    assert row["keys"] == "5 digits" and 0 <= row["held"] <= 2
    del row["held"]
    (tmp_path / "passkey.json").write_text(json.dumps([row]))
    prompts = Prompts(Digits(), seed=0, trials=2)
    log = passkey.TrialLog(tmp_path / passkey.TRIALS, resume=True)
    a = prompts.answers
    for i, teacher in enumerate([[ord("t")] + a[0][1:], a[1][:-1] + [ord("x")]]):  # held, then not
        log.add(row_key(row), prompts.keys, row["model"], i, ([], teacher), 1.0)
    add, added = passkey.TrialLog.add, []
    monkeypatch.setattr(passkey.TrialLog, "add", lambda self, *args: (add(self, *args), added.append(args[3])))
    (again,) = passkey.main(common)
    assert added == [] and again == {**row, "held": 1}
    assert json.loads((tmp_path / "passkey.json").read_text()) == [again]
    assert not (tmp_path / passkey.TRIALS).exists()  # the row is written: its trials leave the log


@pytest.fixture(scope="module")
def exported(tiny_run, tmp_path_factory) -> str:
    pytest.importorskip("transformers", reason="transformers loads hf: checkpoints (pip install -e '.[dev]')")
    from convert.to_hf import export
    return f"hf:{export(tiny_run, tmp_path_factory.mktemp('hf') / 'tiny')}"


@pytest.mark.parametrize("model_kind", ["run", "hf"])
def test_the_shared_prefix_generates_and_predicts_as_a_full_pass(model_kind, tiny_run, request):
    """Depths continue one cached prefix, deepest first, rewound after every trial: generate.py's greedy tokens on
    the whole prompt, and a full forward pass's predictions of the key's tokens."""
    path = tiny_run if model_kind == "run" else request.getfixturevalue("exported")
    model = load_model(path, device="cpu")
    prompts, length, depths = Prompts(load_tokenizer(path), seed=1, trials=3), 300, [0, 0.5, 1]
    cached = dict(passkey.predictions(model, prompts, length, depths, torch.device("cpu")))
    for depth in depths:
        for i in range(3):
            tokens, _ = full_prompt(prompts, i, length, depth)
            answer = prompts.answers[i]
            generated, teacher = cached[depth][i]
            assert generated == list(generate_tokens(model, tokens, len(answer) + passkey.EXTRA_TOKENS, temperature=0))
            with torch.no_grad():
                logits, _ = model(torch.tensor([tokens + answer[:-1]]))
            assert teacher == logits[0, -len(answer):].argmax(-1).tolist(), (depth, i)


@pytest.mark.parametrize("model_kind", ["run", "hf"])
def test_a_rewound_cache_continues_as_a_full_pass(model_kind, tiny_run, request):
    path = tiny_run if model_kind == "run" else request.getfixturevalue("exported")
    model = load_model(path, device="cpu")
    x = torch.randint(0, 512, (1, 96), generator=torch.Generator().manual_seed(0))
    y = torch.randint(0, 512, (1, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full, _ = model(torch.cat([x[:, :40], y], dim=1))
        cache = KVCache(model.cfg.n_layers)
        model(x[:, :40], cache=cache)
        model(x[:, 40:], cache=cache)  # another continuation, then forgotten
        cache.rewind(40)
        continued, _ = model(y, cache=cache)
    torch.testing.assert_close(continued, full[:, 40:], atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError):
        cache.rewind(100)  # past what it holds


def test_the_command_writes_a_heat_map_per_scaling_and_resumes_cell_by_cell(tiny_run, tmp_path):
    run = copy_run(tiny_run, tmp_path, "rope")  # told it was trained at 256 tokens: a prompt fits in L
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["model"]["max_seq_len"] = 256
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    out = tmp_path / "out"
    common = [str(run), "--depths", "0,1", "--trials", "3", "--device", "cpu", "--out", str(out)]
    first = passkey.main([*common, "--scaling", "none", "--lengths", "256"])  # at L only, unscaled
    assert len(first) == 2
    assert all(r["train_length"] == 256 and r["trials"] == 3 and r["keys"] == "a word" for r in first)
    rows = passkey.main([*common, "--scaling", "none,yarn", "--multiples", "1,2", "--resume"])
    assert rows[:2] == first and len(rows) == 8
    at_L = {(r["scaling"], r["depth"]): r for r in rows if r["length"] == 256}
    for depth in (0, 1):  # s = 1 is plain RoPE: yarn's rows repeat the unscaled rows measured before the resume
        assert at_L[("yarn", depth)]["same_as"] == "none" and "seconds" not in at_L[("yarn", depth)]
        assert at_L[("yarn", depth)]["key_tokens"] == at_L[("none", depth)]["key_tokens"]
    assert {r["scaling"] for r in rows if r["length"] == 512 and "seconds" in r} == {"none", "yarn"}
    assert json.loads((out / "passkey.json").read_text()) == rows
    table = (out / "passkey.md").read_text()
    assert "## rope: yarn (L = 256; the key: a word)" in table and "| 1 | = none | " in table
    assert (out / "passkey.png").stat().st_size > 0
    listed_first = passkey.main([*common[:-1], str(tmp_path / "yarn-first"), "--scaling", "yarn,none",
                                 "--lengths", "256"])
    assert [r["scaling"] for r in listed_first if "seconds" in r] == ["none", "none"]  # measured unscaled, whatever the order
    dynamic = passkey.main([*common[:-1], str(tmp_path / "dynamic"), "--scaling", "dynamic", "--lengths", "512"])
    assert [r["scaling"] for r in dynamic if "seconds" in r] == ["dynamic"] * 2  # decoded past L in chunks


def test_a_killed_evaluation_resumes_trial_by_trial(tiny_run, tmp_path, monkeypatch):
    """A kill in the middle of a row keeps its finished trials (passkey-trials.jsonl): --resume measures only the
    others and gives the rows an uninterrupted evaluation gives; once every row is written the log is gone."""
    common = [str(tiny_run), "--lengths", "256", "--depths", "0,1", "--trials", "3", "--scaling", "none",
              "--device", "cpu"]
    whole = passkey.main([*common, "--out", str(tmp_path / "whole")])
    add, added = passkey.TrialLog.add, []

    def add_then_kill(self, *args):
        add(self, *args)
        added.append(args[3])
        if len(added) == 4:  # the deepest key's row (depth 1) finished and one trial of depth 0
            raise KeyboardInterrupt
    monkeypatch.setattr(passkey.TrialLog, "add", add_then_kill)
    out = tmp_path / "cut"
    with pytest.raises(SystemExit):
        passkey.main([*common, "--out", str(out)])
    assert [r["depth"] for r in json.loads((out / "passkey.json").read_text())] == [1.0]
    assert len((out / passkey.TRIALS).read_text().splitlines()) == 4
    added.clear()
    monkeypatch.setattr(passkey.TrialLog, "add", lambda self, *args: (add(self, *args), added.append(args[3])))
    resumed = passkey.main([*common, "--out", str(out), "--resume"])
    assert added == [1, 2]  # depth 0's trials after the one kept
    drop = ("seconds",)
    assert sorted(({k: v for k, v in r.items() if k not in drop} for r in resumed), key=lambda r: r["depth"]) == \
        sorted(({k: v for k, v in r.items() if k not in drop} for r in whole), key=lambda r: r["depth"])
    assert not (out / passkey.TRIALS).exists()


def test_trials_logged_from_other_weights_are_measured_again(tiny_run, tmp_path, monkeypatch):
    """The log outlives a machine: a trial of the same row and keys logged from weights that differ (a fine-tune
    trained again) is not counted, and the trials logged name the model they were measured on."""
    common = [str(tiny_run), "--lengths", "256", "--depths", "0", "--trials", "2", "--scaling", "none",
              "--device", "cpu", "--out", str(tmp_path), "--resume"]
    whole = passkey.main(common)
    (tmp_path / "passkey.json").unlink()
    log = passkey.TrialLog(tmp_path / passkey.TRIALS, resume=True)
    prompts = passkey.Prompts(load_tokenizer(tiny_run), 0, 2)
    for i, answer in enumerate(prompts.answers):  # the row's trials, as another model answered them: every key found
        log.add(row_key(whole[0]), prompts.keys, "sha256:0 float32", i, (answer, answer), 1.0)
    add, added = passkey.TrialLog.add, []
    monkeypatch.setattr(passkey.TrialLog, "add", lambda self, *args: (add(self, *args), added.append(args[2])))
    again = passkey.main(common)
    assert [r["hits"] for r in again] == [r["hits"] for r in whole]
    identity = passkey.model_identity(load_model(tiny_run), torch.device("cpu"))
    assert added == [identity, identity] and identity.endswith(" float32")
    assert [r["model"] for r in again] == [identity]  # the row names the weights its trials were measured on


def test_the_trials_of_another_runs_unfinished_row_outlive_an_evaluation_that_finishes_its_own(tiny_run, tmp_path):
    """Two runs evaluated one after the other into one --out share its trial log: the first run's evaluation
    writes all its rows, and the second run's trials, kept for its resume, are still there; a trial of a row
    already written goes."""
    out = tmp_path / "out"
    out.mkdir()
    other = passkey.TrialLog(out / passkey.TRIALS, resume=True)
    other.add(("another-run", 1, "none", 256, 0.0), ["123"], "sha256:0 float32", 0, ([1, 2], [1, 2]), 3.0)
    foreign = (out / passkey.TRIALS).read_text()
    common = [str(tiny_run), "--lengths", "256", "--depths", "0", "--trials", "2", "--scaling", "none",
              "--device", "cpu", "--out", str(out), "--resume"]
    rows = passkey.main(common)
    assert (out / passkey.TRIALS).read_text() == foreign
    stale = passkey.TrialLog(out / passkey.TRIALS, resume=True)  # a trial of the row just written, left by a kill
    stale.add(row_key(rows[0]), ["456"], "sha256:0 float32", 0, ([1], [1]), 1.0)
    assert passkey.main(common) == rows  # nothing measured again
    assert (out / passkey.TRIALS).read_text() == foreign


@pytest.mark.parametrize("method", ["self-extend", "{type: sinks, sinks: 4, window: 32}"])
def test_a_context_method_gives_a_run_and_its_export_the_same_cells(method, tiny_run, exported, tmp_path):
    rows = passkey.main([str(tiny_run), exported, "--lengths", "256", "--depths", "0,1", "--trials", "3",
                         "--context-method", method, "--device", "cpu", "--out", str(tmp_path)])
    assert len(rows) == 4 and rows[0]["seed"] != rows[2]["seed"]  # the run's seed; an hf: checkpoint has 0
    ours, theirs = {r["depth"]: r for r in rows[:2]}, {r["depth"]: r for r in rows[2:]}  # the run's, then the export's
    assert sorted(ours) == sorted(theirs) == [0.0, 1.0]
    for depth, r in ours.items():  # no scaling under a context method unless asked; the label names the method
        assert r["scaling"] == theirs[depth]["scaling"] and r["scaling"].split(" (")[0] == r["context"]["type"]
        assert r["context"] == theirs[depth]["context"]
        assert (r["hits"], r["key_tokens"]) == (theirs[depth]["hits"], theirs[depth]["key_tokens"])
    plain = passkey.main([str(tiny_run), "--lengths", "256", "--depths", "0", "--trials", "3", "--scaling", "none",
                          "--device", "cpu", "--out", str(tmp_path), "--resume"])  # not taken for done
    assert [r["scaling"] for r in plain[len(rows):]] == ["none"] and plain[-1]["context"] is None


@pytest.mark.skipif(not (SMOLLM2 / "SOURCE.md").is_file(),
                    reason=f"SmolLM2 is not prepared in {SMOLLM2.relative_to(ROOT)} (make smollm2)")
def test_smollm2_finds_the_key_inside_its_context(tmp_path):
    rows = passkey.main([f"hf:{SMOLLM2}", "--lengths", "1024", "--depths", "0,1", "--trials", "2", "--scaling",
                         "none", "--device", "cpu", "--out", str(tmp_path)])
    assert [r["value"] for r in rows] == [1.0, 1.0] and rows[0]["keys"] == "5 digits"
