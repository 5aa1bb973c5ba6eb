"""Where each attention head looks when a task asks: for every answer of a task's validation sequences at
L, the share of attention each head of each layer gives, from the token that asks (the one that predicts
the answer) to the token that holds the answer (data/tasks.py's Sample.facts). A head that retrieves a
fact gives it most of its attention; a run that has not learned a task may have no such head at all, or
one that looks at the fact and a later layer that does not use it. For the induction tasks (copy,
recall, passkey) the token that holds the answer is the one after the earlier occurrence of the asking
token, so the share is the induction head's.

    python -m eval.heads runs/tasks/seed9/alibi runs/tasks/seed9/rope [--tasks recall1,passkey1] \
        [--samples 64] [--length 2048] [--out runs/eval/heads] [--resume]

--length reads sequences of that many tokens instead of L: whether the head that retrieves at L still
gives the fact its attention where the run fails or holds past L.

Writes heads.json (per run and task: the accuracy on the same sequences, overall and by the order the answers
are asked in, beside `bag_solver`'s, and the layers x heads shares, for the induction tasks the previous-token
shares too), heads.md (per run and task: the accuracy and the head that looks most, with its share; the
previous-token head; for a task a run has not learned, its accuracy by order beside the solver's) and
heads.png (each run and task's layers x heads shares as a small heat map); --resume keeps the rows of the
runs not given (make extrapolation-tasks adds each seed's).
"""
from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

import numpy as np
import torch

from checkpoint import atomic_write_text, hold, load_model
from config import ArgumentParser, UserError, run_cli
from data.tasks import TASKS, VAL_SEED, bag_solver, sample, task_names
from eval.harness import read_runs
from model.attention import causal_mask
from model.gpt import GPT
from eval.results.heads import RESULTS, markdown, plot
from eval.results.rows import previous_rows

DEFAULT_SAMPLES = 64
MAX_WEIGHTS = 1 << 28  # attention weights held at once (1 GiB of float32): long sequences go a few at a time


def attention_weights(model: GPT, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The logits of one forward pass of x (B, T) without a cache, and the attention weights (B, H, T, T) of each
    of its layers: softmax(q.k * scale + the encoding's bias) over the causal keys, from the layer's own
    projections and its encoding's rotation, bias or folded bias (tests/test_heads.py: times v, they give the
    model's attention output)."""
    weights = []

    def look(attn, inputs):
        h, ctx, pe = inputs[:3]
        q, k, _ = attn.project(h)
        q, k = pe.rotate(q, k, ctx)
        scale = (attn.attention_scalar or attn.head_dim) ** -0.5
        if ctx.bias is None:
            q, k = pe.fold(q, k, ctx, scale)  # ALiBi: its bias as one more dimension of q and k
        scores = q.float() @ k.float().repeat_interleave(attn.n_heads // attn.n_kv_heads, 1).transpose(-1, -2)
        scores = scores * scale
        if ctx.bias is not None:  # -inf on future keys already
            scores = scores + ctx.bias
        else:
            scores = scores.masked_fill(~causal_mask(ctx.q_pos, ctx.k_pos, ctx.window), float("-inf"))
        weights.append(scores.softmax(-1))

    hooks = [block.attn.register_forward_pre_hook(look) for block in model.blocks]
    try:
        with torch.no_grad():
            logits, _ = model(x)
    finally:
        for hook in hooks:
            hook.remove()
    return logits, weights


def look_at_facts(model: GPT, task: str, samples: int, length: int | None = None, start_token: bool = False) -> dict:
    """A task's first `samples` validation sequences of `length` tokens (default L): the accuracy on their
    answers, and for each layer and head the mean attention share from the token that asks for an answer to
    the token that holds it; for the induction tasks also the share from the token that holds it to the token
    before it (the key for recall): the previous-token head, the circuit's first half."""
    cfg = model.cfg
    induction = TASKS[task].holder == 1  # the answer sits one token after what the asking token matches
    n = length or cfg.max_seq_len
    drawn = [sample(task, n + 1, VAL_SEED, j, start_token=start_token) for j in range(samples)]
    per_call = max(1, MAX_WEIGHTS // (cfg.n_layers * cfg.n_heads * n * n))
    right, shares, previous = [], [], []
    for first in range(0, samples, per_call):
        part = drawn[first:first + per_call]
        tokens = torch.from_numpy(np.stack([s.tokens for s in part]))
        logits, weights = attention_weights(model, tokens[:, :-1])
        weights, predicted = torch.stack(weights, dim=1), logits.argmax(-1)  # (B, layers, H, T, T), (B, T)
        rows, asks, facts = zip(*[(b, a - 1, f) for b, s in enumerate(part) for a, f in zip(s.answers, s.facts)])
        rows, asks, facts = (torch.tensor(v) for v in (rows, asks, facts))
        right.append(predicted[rows, asks] == tokens[rows, asks + 1])
        shares.append(weights[rows, :, :, asks, facts])  # (answers, layers, H)
        if induction:
            previous.append(weights[rows, :, :, facts, facts - 1])
    right, share = torch.cat(right), torch.cat(shares).mean(0)
    by_order = right.view(samples, -1).float().mean(0)  # every sequence of a task asks as many questions
    return {"accuracy": right.float().mean().item(), "answers": len(right), "share": share.tolist(),
            "by_order": by_order.tolist(), "bag_by_order": bag_solver(drawn).tolist(),
            **({"previous": torch.cat(previous).mean(0).tolist()} if induction else {})}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="run directories trained on a task source")
    parser.add_argument("--tasks", default=None, help="tasks to look at (default: each run's own)")
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES,
                        help=f"validation sequences per task (default {DEFAULT_SAMPLES})")
    parser.add_argument("--length", type=int, default=None,
                        help="tokens a sequence (default: each run's training length L)")
    parser.add_argument("--out", type=Path, default=Path("runs/eval/heads"))
    parser.add_argument("--resume", action="store_true", help=f"keep the rows in --out/{RESULTS} of other runs")
    args = parser.parse_args(argv)
    held = contextlib.ExitStack()

    def work() -> list[dict]:
        if args.samples < 1:
            raise UserError(f"--samples must be >= 1, got {args.samples}")
        if args.length is not None and args.length < 1:
            raise UserError(f"--length must be >= 1, got {args.length}")
        asked = None if args.tasks is None else task_names(f"tasks:{args.tasks}")
        if args.out.exists() and not args.out.is_dir():
            raise UserError(f"--out {args.out} is a file, not a folder")
        runs = read_runs(args.runs, tasks=True)
        held.enter_context(hold(args.out, "eval.heads"))
        measured = {(run.name, run.seed) for run in runs}
        kept = previous_rows(args.out / RESULTS, "eval.heads", "share") if args.resume else []
        rows = [r for r in kept if (r["run"], r["seed"]) not in measured]
        if any(r.get("length") != args.length for r in rows):
            raise UserError(f"{args.out / RESULTS} holds rows of another --length: give another --out")
        for run in runs:
            model = load_model(run.path)
            for task in asked or task_names(run.data.source):
                rows.append({"run": run.name, "seed": run.seed, "position": run.position, "task": task,
                             **({} if args.length is None else {"length": args.length}),
                             **look_at_facts(model, task, args.samples, args.length, run.data.start_token)})
        return rows

    with held:
        rows = run_cli(work)
        atomic_write_text(args.out / RESULTS, json.dumps(rows, indent=1) + "\n")
        atomic_write_text(args.out / "heads.md", markdown(rows))
        plot(rows, args.out / "heads.png")
    print(markdown(rows))
    print(f"wrote {args.out}/{RESULTS}, heads.md, heads.png")
    return rows


if __name__ == "__main__":
    main()
