"""eval.heads: the attention weights it reads are the model's own, and its shares are taken at the right tokens."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from config import ModelConfig, PositionConfig
from data.tasks import TASKS, VAL_SEED, VOCAB_SIZE, Sample, bag_solver, sample, values_only_level
from eval.heads import attention_weights, look_at_facts, main
from model.gpt import GPT
from model.positions import ENCODINGS
from eval.results.heads import markdown


def tiny(position: str, L: int = 32, layer_pattern: str | None = None, sliding_window: int | None = None) -> GPT:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=VOCAB_SIZE, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=L,
                      init_std=0.2, sliding_window=sliding_window,
                      position=PositionConfig(type=position, layer_pattern=layer_pattern))
    return GPT(cfg).eval()


@torch.no_grad()
@pytest.mark.parametrize("position, layers", [(p, {}) for p in sorted(ENCODINGS)]
                         + [("rope", {"layer_pattern": "rope,nope", "sliding_window": 8})])  # RNoPE-SWA's layers
def test_the_weights_times_the_values_are_the_models_attention_output(position, layers):
    model = tiny(position, **layers)
    inputs, outputs = [], []
    hooks = [h for block in model.blocks for h in (
        block.attn.register_forward_pre_hook(lambda m, args: inputs.append(args[0])),
        block.attn.o_proj.register_forward_pre_hook(lambda m, args: outputs.append(args[0])))]
    x = torch.randint(0, VOCAB_SIZE, (3, 32), generator=torch.Generator().manual_seed(1))
    logits = model(x)[0]
    for h in hooks:
        h.remove()
    got, weights = attention_weights(model, x)
    assert torch.equal(got, logits)
    assert len(weights) == 2 and weights[0].shape == (3, 4, 32, 32)
    for w, h, y, block in zip(weights, inputs[:2], outputs, model.blocks):
        attn = block.attn
        assert torch.allclose(w.sum(-1), torch.ones(3, 4, 32)) and (w.triu(1) == 0).all()  # causal rows
        v = attn.project(h)[2].repeat_interleave(2, 1)  # two query heads a key-value head
        torch.testing.assert_close((w @ v).transpose(1, 2).reshape(3, 32, -1), y, atol=1e-5, rtol=1e-4)


@torch.no_grad()
@pytest.mark.parametrize("task", ["copy", "recall1"])
def test_the_share_is_read_from_the_asking_token_to_the_fact(task):
    model = tiny("alibi")
    got = look_at_facts(model, task, samples=5)
    drawn = [sample(task, 33, VAL_SEED, j) for j in range(5)]
    x = torch.from_numpy(np.stack([s.tokens for s in drawn]))[:, :-1]
    logits, weights = attention_weights(model, x)
    predicted = logits.argmax(-1)
    share, right, n = np.zeros((2, 4)), 0, 0
    by_order = np.zeros(len(drawn[0].answers))
    for b, s in enumerate(drawn):
        for j, (a, f) in enumerate(zip(s.answers, s.facts)):
            share += np.array([[w[b, h, a - 1, f].item() for h in range(4)] for w in weights])
            right += int(predicted[b, a - 1]) == s.tokens[a]
            by_order[j] += int(predicted[b, a - 1]) == s.tokens[a]
            n += 1
    assert got["answers"] == n == 5 * len(drawn[0].answers)
    assert got["accuracy"] == pytest.approx(right / n)
    np.testing.assert_allclose(got["by_order"], by_order / 5)
    np.testing.assert_allclose(got["share"], share / n, rtol=1e-5)
    table = markdown([{"run": "r", "seed": 1, "task": task, **got}])
    if task == "copy":  # an induction task: each fact's token to the token before it
        previous = np.mean([[[w[b, h, f, f - 1].item() for h in range(4)] for w in weights]
                            for b, s in enumerate(drawn) for f in s.facts], axis=0)
        np.testing.assert_allclose(got["previous"], previous, rtol=1e-5)
        assert "the token before it" in table
    else:  # single-hop: the fact is one token, nothing before it belongs to it
        assert "previous" not in got and "the token before it" not in table


@torch.no_grad()
def test_long_sequences_go_a_few_at_a_time_with_the_same_result(monkeypatch):
    import eval.heads
    model = tiny("t5")
    whole = look_at_facts(model, "recall", samples=6, length=96)  # 3x L, past the training length
    assert whole["answers"] == 6 * 8 and len(whole["share"]) == 2
    monkeypatch.setattr(eval.heads, "MAX_WEIGHTS", 2 * 4 * 96 * 96 * 4)  # four sequences a forward pass: 4 + 2
    parts = look_at_facts(model, "recall", samples=6, length=96)
    assert parts["accuracy"] == whole["accuracy"] and parts["by_order"] == whole["by_order"]
    np.testing.assert_allclose(parts["share"], whole["share"], rtol=1e-5)
    drawn = [sample("recall", 97, VAL_SEED, j) for j in range(6)]  # the length is the sequences', not L's
    x = torch.from_numpy(np.stack([s.tokens for s in drawn]))[:, :-1]
    weights = attention_weights(model, x)[1]
    first = np.mean([[[w[b, h, a - 1, f].item() for h in range(4)] for w in weights]
                     for b, s in enumerate(drawn) for a, f in zip(s.answers, s.facts)], axis=0)
    np.testing.assert_allclose(whole["share"], first, rtol=1e-5)


def test_the_bag_solver_gives_an_answer_not_yet_given():
    def asking(*answers):
        tokens = np.array([0, *answers])
        return Sample(tokens, np.arange(1, len(tokens)), np.zeros(len(answers), dtype=int))
    np.testing.assert_allclose(bag_solver([asking(5, 5, 6)]), [2 / 3, 1 / 2, 1])  # one 5 of three, one of two left
    np.testing.assert_allclose(bag_solver([asking(5, 5, 6), asking(7, 8, 9)]), [(2 / 3 + 1 / 3) / 2, 1 / 2, 1])
    copy = [sample("copy", 64, VAL_SEED, j) for j in range(3)]  # seven distinct answers: 1/7, 1/6 ... 1
    np.testing.assert_allclose(bag_solver(copy), 1 / np.arange(7, 0, -1))
    assert bag_solver([sample("passkey1", 64, VAL_SEED, 0)]).tolist() == [1.0]


def test_the_tasks_a_run_has_not_learned_are_shown_by_order():
    row = {"run": "nope", "seed": 3, "share": [[0.1, 0.2]], "answers": 16}
    rows = [dict(row, task="recall", accuracy=0.375, by_order=[0.25, 0.5], bag_by_order=[0.5, 1.0]),
            dict(row, task="copy", accuracy=0.95, by_order=[1.0, 0.9], bag_by_order=[0.5, 1.0]),
            dict(row, task="passkey1", accuracy=0.5, by_order=[0.5], bag_by_order=[1.0])]
    text = markdown(rows)
    assert "| nope | 3 | recall | 38 | 25 50 | 75 | 50 100 |" in text
    assert "| nope | 3 | copy |" not in text and "| nope | 3 | passkey1 |" not in text  # learned; one answer
    assert "by order" not in markdown(rows[1:])


def test_the_command_writes_its_tables_and_refuses_bad_input(tmp_path, capsys):
    import train
    train.main(["--config", str(Path(__file__).parents[1] / "studies/tasks/tasks.yaml"), f"run.out_dir={tmp_path}",
                "run.name=run", "run.seed=3", "run.device=cpu", "data.source=tasks:recall1,passkey1", "model.max_seq_len=32", "model.d_model=32",
                "train.max_steps=2", "train.batch_size=4", "train.warmup_steps=1", "train.eval_every=2",
                "train.ckpt_every=2", "train.eval_tokens=128", "train.decay_steps=null"])
    run = tmp_path / "run"
    rows = main([str(run), "--samples", "4", "--out", str(tmp_path / "out")])
    assert [(r["task"], r["seed"], r["answers"]) for r in rows] == [("recall1", 3, 32), ("passkey1", 3, 4)]
    assert json.loads((tmp_path / "out" / "heads.json").read_text()) == rows
    assert "| run | 3 |" in (tmp_path / "out" / "heads.md").read_text()
    assert (tmp_path / "out" / "heads.png").read_bytes()[:4] == b"\x89PNG"
    again = main([str(run), "--samples", "2", "--tasks", "passkey1", "--out", str(tmp_path / "out"), "--resume"])
    assert [(r["task"], r["answers"]) for r in again] == [("passkey1", 2)]  # the run's rows replaced, not added to
    other = dict(rows[0], run="other")
    (tmp_path / "out" / "heads.json").write_text(json.dumps([other]))
    assert main([str(run), "--tasks", "passkey1", "--out", str(tmp_path / "out"), "--resume"])[0] == other
    (tmp_path / "out" / "heads.json").write_text("{}")
    with pytest.raises(SystemExit) as exit:
        main([str(run), "--out", str(tmp_path / "out"), "--resume"])
    assert exit.value.code == 2 and json.loads((tmp_path / "out" / "heads.json").read_text()) == {}
    for bad in (["--samples", "0"], ["--tasks", "recall9"], ["--length", "0"]):
        with pytest.raises(SystemExit) as exit:
            main([str(run), "--out", str(tmp_path / "bad"), *bad])
        assert exit.value.code == 2 and not (tmp_path / "bad").exists()
    long = main([str(run), "--samples", "2", "--length", "64", "--out", str(tmp_path / "long")])
    assert {(r["length"], r["answers"]) for r in long} == {(64, 16), (64, 2)}
    assert "validation sequences of 64 tokens" in (tmp_path / "long" / "heads.md").read_text()
    kept = [dict(long[0], run="other")]  # another run's rows at 64 tokens, then this run's at L: refused
    (tmp_path / "long" / "heads.json").write_text(json.dumps(kept))
    with pytest.raises(SystemExit) as exit:
        main([str(run), "--tasks", "passkey1", "--out", str(tmp_path / "long"), "--resume"])
    assert exit.value.code == 2 and json.loads((tmp_path / "long" / "heads.json").read_text()) == kept
    assert "error:" in capsys.readouterr().err


def test_the_values_only_level_beats_chance_on_every_task_of_several_answers():
    """With n answers, all distinct, the bag solver scores the mean of 1/(n - j), j < n; repeated values only help."""
    assert values_only_level("passkey1", 128) is None  # one answer: reading the values is reading the answer
    for task in ("copy", "recall", "passkey", "recall1"):
        n = len(sample(task, 129, VAL_SEED, 0).answers)
        level = values_only_level(task, 128)
        assert TASKS[task].chance < np.mean([1 / (n - j) for j in range(n)]) <= level < 1, task
