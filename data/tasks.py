"""Long-range tasks: sequences that can only be completed by reading back to a fact stated earlier.

A data source like a text corpus (`data.source: tasks`, or `tasks:recall1,passkey1` for some of them),
so training, resume, checkpoints, DDP, scalings and fine-tunes work unchanged. Every sequence is one
task, chosen at random; its facts sit at random places in random filler, so no fixed offset solves it,
and the questions come at the end. Loss and accuracy count the answer tokens only (targets are -1
elsewhere). Sequences are a pure function of (seed, step, index), like the text batches.

    copy      a span of 8 distinct symbols, repeated at the end: predict its tokens after the first
              (induction copying, Olsson et al. 2022, arXiv 2209.11895)
    recall    8 key-value pairs (two tokens each) in the filler; at the end every key is asked again,
              answered by its value: multi-query associative recall (Zoology, arXiv 2312.04927)
    passkey   a KEY marker and five digits, once; at the end the marker again, answered by the digits
              (the passkey retrieval of Mohtashami & Jaggi, arXiv 2305.16300, used by the PI and YaRN papers)
    recall1   8 pairs, each fused into one token (16 keys x 4 values), every key asked twice at the end:
              single-hop, the question needs no previous-token circuit, only attention from the key to the
              token that holds it
    passkey1  one fused passkey token (one of 16) in the filler; at the end a QUERY marker, answered by it

Training places facts anywhere in the window. `distances=(lo, hi)` places them more than lo and at most
hi tokens before the sequence's last token (eval.tasks), so that "positions past L at a distance seen
in training" (hi <= L in a longer sequence) and "a distance longer than any seen in training" (lo >= L)
are measured apart. `Sample.distances` gives each answer's own distance, from the token that predicts it
back to the token that holds it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from config import DataConfig, UserError, is_task_source

# The vocabulary: disjoint alphabets, so a fact's tokens never occur in the filler.
QUERY, KEY = 0, 1
FILLER = np.arange(2, 34)     # 32 noise symbols
KEYS = np.arange(34, 50)      # 16 keys
VALUES = np.arange(50, 66)    # 16 values; the first 10 are the passkey's digits
PAIRS = 66                    # 66 + 4 * key + value: a key and one of 4 values in one token
PASSES = 130                  # 130 + value: the passkey marker and one of 16 values in one token
VOCAB_SIZE = 146

VAL_SEED = 987_654_321  # validation sequences: the same for every run and seed


@dataclass
class Sample:
    tokens: np.ndarray   # (n,) int64; the model reads tokens[:-1] and predicts tokens[1:]
    answers: np.ndarray  # indices into tokens of the answer tokens (each >= 1)
    facts: np.ndarray    # for each answer, the index of the token holding it

    @property
    def distances(self) -> np.ndarray:
        return self.answers - 1 - self.facts


@dataclass(frozen=True)
class Task:
    make: Callable[..., Sample]  # (rng, n_tokens, distances) -> Sample
    question_len: int  # tokens of the question block at the end
    fact_len: int  # tokens of one fact
    n_facts: int


TASKS: dict[str, Task] = {}


def register(name: str, question_len: int, fact_len: int, n_facts: int):
    def wrap(fn):
        TASKS[name] = Task(fn, question_len, fact_len, n_facts)
        return fn
    return wrap


def place(rng: np.random.Generator, n_tokens: int, task: Task, distances: tuple[int, int] | None) -> np.ndarray:
    """Random non-overlapping starts of the task's facts in the context before the question block; with
    `distances` = (lo, hi), every fact token lies more than lo and at most hi tokens before the last one."""
    c = n_tokens - task.question_len
    a, e = 0, c
    if distances is not None:
        lo, hi = distances
        a, e = max(0, n_tokens - 1 - hi), min(c, n_tokens - 1 - lo)
    free = e - a - task.n_facts * task.fact_len  # slack to spread among the gaps
    if free < 0:
        raise UserError(f"{task.n_facts} facts of {task.fact_len} tokens do not fit in {e - a} tokens "
                        f"(sequence of {n_tokens})")
    gaps = np.sort(rng.choice(free + task.n_facts, task.n_facts, replace=False))  # stars and bars
    return a + gaps + np.arange(task.n_facts) * (task.fact_len - 1)


def filler(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.choice(FILLER, n)


@register("copy", question_len=8, fact_len=8, n_facts=1)
def copy_task(rng, n, distances=None):
    span = rng.choice(np.concatenate([KEYS, VALUES]), 8, replace=False)
    tokens = filler(rng, n)
    (p,) = place(rng, n, TASKS["copy"], distances)
    tokens[p:p + 8] = span
    tokens[n - 8:] = span
    answers = np.arange(n - 7, n)  # the first token of the repeat is not predictable
    return Sample(tokens, answers, p + np.arange(1, 8))


@register("recall", question_len=16, fact_len=2, n_facts=8)
def recall_task(rng, n, distances=None):
    keys = rng.choice(KEYS, 8, replace=False)
    values = rng.choice(VALUES, 8)
    tokens = filler(rng, n)
    starts = place(rng, n, TASKS["recall"], distances)
    tokens[starts], tokens[starts + 1] = keys, values
    order = rng.permutation(8)
    answers = n - 16 + 1 + 2 * np.arange(8)
    tokens[answers - 1], tokens[answers] = keys[order], values[order]
    return Sample(tokens, answers, starts[order] + 1)


@register("passkey", question_len=6, fact_len=6, n_facts=1)
def passkey_task(rng, n, distances=None):
    digits = rng.choice(VALUES[:10], 5)
    tokens = filler(rng, n)
    (p,) = place(rng, n, TASKS["passkey"], distances)
    tokens[p], tokens[p + 1:p + 6] = KEY, digits
    tokens[n - 6], tokens[n - 5:] = KEY, digits
    return Sample(tokens, np.arange(n - 5, n), p + np.arange(1, 6))


@register("recall1", question_len=32, fact_len=1, n_facts=8)
def single_hop_recall_task(rng, n, distances=None):
    keys = rng.choice(16, 8, replace=False)
    values = rng.choice(4, 8)
    tokens = filler(rng, n)
    starts = place(rng, n, TASKS["recall1"], distances)
    tokens[starts] = PAIRS + 4 * keys + values
    order = rng.permutation(np.tile(np.arange(8), 2))  # every key asked twice
    answers = n - 32 + 1 + 2 * np.arange(16)
    tokens[answers - 1], tokens[answers] = KEYS[keys[order]], VALUES[values[order]]
    return Sample(tokens, answers, starts[order])


@register("passkey1", question_len=2, fact_len=1, n_facts=1)
def single_hop_passkey_task(rng, n, distances=None):
    value = int(rng.integers(16))
    tokens = filler(rng, n)
    (p,) = place(rng, n, TASKS["passkey1"], distances)
    tokens[p] = PASSES + value
    tokens[n - 2], tokens[n - 1] = QUERY, VALUES[value]
    return Sample(tokens, np.array([n - 1]), np.array([p]))


def task_names(source: str) -> list[str]:
    """The tasks of a `tasks` or `tasks:a,b` source, in registry order; a UserError for an unknown name."""
    if not is_task_source(source):
        raise UserError(f"data.source {source!r} is not a task source (tasks or tasks:NAME,...)")
    if source == "tasks":
        return list(TASKS)
    names = [x.strip() for x in source.split(":", 1)[1].split(",") if x.strip()]
    unknown = [x for x in names if x not in TASKS]
    if unknown or not names:
        raise UserError(f"data.source {source!r}: unknown task {unknown[0] if unknown else '(none given)'!r}; "
                        f"choose from {', '.join(TASKS)} (e.g. tasks:recall1,passkey1, or tasks for all)")
    return [t for t in TASKS if t in names]


def sample(task: str, n_tokens: int, seed: int, index: int, distances: tuple[int, int] | None = None) -> Sample:
    """One sequence of `n_tokens`, a pure function of its arguments."""
    rng = np.random.default_rng([seed, index, list(TASKS).index(task), n_tokens, *(distances or ())])
    return TASKS[task].make(rng, n_tokens, distances)


def to_batch(samples: list[Sample]) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y), each (B, n - 1) int64: y is x shifted by one and -1 except at the answers."""
    tokens = torch.from_numpy(np.stack([s.tokens for s in samples]))
    y = torch.full_like(tokens, -1)
    for i, s in enumerate(samples):
        y[i, s.answers] = tokens[i, s.answers]
    return tokens[:, :-1].contiguous(), y[:, 1:].contiguous()


class TaskData:
    """A task source as training batches and validation batches, in the shape TokenData gives them."""

    def __init__(self, cfg: DataConfig):
        self.tasks = task_names(cfg.source)
        if cfg.vocab_size < VOCAB_SIZE:
            raise UserError(f"data.vocab_size must be at least {VOCAB_SIZE} for task sources (their vocabulary), "
                            f"got {cfg.vocab_size}")

    def batch(self, batch_size: int, seq_len: int, seed: int, step: int, micro_step: int = 0,
              micro_steps: int = 1, rank: int = 0, world_size: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """Sequences of the global batch's slice (micro_step, rank), each a task chosen at random: the
        same global batch whatever the split over processes and micro-steps (see TokenData.batch)."""
        first = (micro_step * world_size + rank) * batch_size
        samples = []
        for index in range(first, first + batch_size):
            global_index = step * batch_size * micro_steps * world_size + index
            task = self.tasks[np.random.default_rng([seed, global_index]).integers(len(self.tasks))]
            samples.append(sample(task, seq_len + 1, seed, global_index))
        return to_batch(samples)

    def validation(self, seq_len: int, max_tokens: int, batch_size: int) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
        """Fixed (task, x, y) batches, the same number of sequences for each task, about max_tokens in all."""
        for task in self.tasks:
            spec = TASKS[task]
            needed = spec.question_len + spec.n_facts * spec.fact_len
            if seq_len < needed:
                raise UserError(f"model.max_seq_len {seq_len} is too short for the {task} task, which needs "
                                f"at least {needed} tokens")
        per_task = max(1, max_tokens // (seq_len * len(self.tasks)))
        out = []
        for task in self.tasks:
            for i in range(0, per_task, batch_size):
                samples = [sample(task, seq_len + 1, VAL_SEED, j) for j in range(i, min(per_task, i + batch_size))]
                out.append((task, *to_batch(samples)))
        return out
