"""Long-range tasks: sequences that can only be completed by reading back to a fact stated earlier.

A data source like a text corpus (`data.source: tasks`, `tasks:recall1,passkey1` for some of them, or
`tasks:copy,recall*3,passkey,recall1,passkey1` to draw recall three times as often as each other task),
so training, resume, checkpoints, DDP, scalings and fine-tunes work unchanged. Every sequence is one
task, chosen at random; its facts sit at random places in filler, so no fixed offset solves it, and the
questions come at the end. Accuracy and validation loss count the answer tokens only (targets are -1
elsewhere); training also predicts one filler token in eight (see `filler`). Sequences are a pure function
of (seed, step, index), like the text batches.

    copy      a span of 8 distinct values, repeated at the end: predict its tokens after the first
              (induction copying, Olsson et al. 2022, arXiv 2209.11895)
    recall    8 key-value pairs (two tokens each) in the filler; at the end every key is asked once,
              answered by its value: multi-query associative recall (Zoology, arXiv 2312.04927)
    passkey   a KEY marker and five distinct digits, once; at the end the marker again, answered by the
              digits (the passkey retrieval of Mohtashami & Jaggi, arXiv 2305.16300, used by the PI and YaRN
              papers; distinct, so that each digit names the next one without ambiguity)
    recall1   8 pairs, each fused into one token (16 keys x 4 values), every key asked once at the end by a
              question token of its own (ASKS): single-hop, the question needs no previous-token circuit,
              only attention from the question to the token that holds it
    passkey1  one fused passkey token (one of 16) in the filler; at the end a QUERY marker, answered by it

A question token names the rule that answers it: the induction tasks (copy, recall, passkey) ask with
values, keys and KEY, the single-hop ones with ASKS and QUERY. Asked by the same key tokens, recall and
recall1 competed for the same heads, and one of the two stayed unlearned on some seeds (studies/tasks).

Two rules keep the measurement honest. Nothing near a question gives its answer away: every key is asked
once, and the facts' alphabets never occur in the filler, so a solver that reads only the last k tokens
is at chance for facts farther back than k (tests/test_tasks.py runs one). And a fact's distance is
counted from the token that asks (the one that predicts the answer) back to the token that holds the
answer (`Sample.distances`): `distances=(lo, hi)` places every fact so that each of its answers lies
more than lo and at most hi tokens back from the token that asks for it. Training places facts anywhere
before the questions, so every training distance is below the training length L: a band with lo >= L
holds only distances longer than any seen in training, and a band with hi <= L in a longer sequence
holds positions past L at distances seen in training (eval.tasks measures the two apart).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from config import DataConfig, UserError, is_task_source

# The vocabulary: disjoint alphabets, so a fact's tokens never occur in the filler.
QUERY, KEY = 0, 1
FILLER = np.arange(2, 34)     # 32 noise symbols
KEYS = np.arange(34, 50)      # 16 keys
VALUES = np.arange(50, 66)    # 16 values, the only answers of every task; the first 10 are the passkey's digits
PAIRS = 66                    # 66 + 4 * key + value: a key and one of 4 values in one token
PASSES = 130                  # 130 + value: the passkey marker and one of 16 values in one token
ASKS = np.arange(146, 162)    # recall1's questions: key k asked by ASKS[k], not by KEYS[k] as recall asks it
VOCAB_SIZE = 162
START = 162                   # data.start_token: a token of its own before every sequence (vocabulary 163)
IS_FILLER = np.isin(np.arange(START + 1), FILLER)  # by token id: one lookup instead of np.isin per sequence

VAL_SEED = 987_654_321  # validation sequences: the same for every run and seed
FOLLOW = 0.75  # share of filler tokens that continue their chain
FILLER_TARGETS = 1 / 8  # share of filler tokens training predicts beside the answers


@dataclass
class Sample:
    tokens: np.ndarray   # (n,) int64; the model reads tokens[:-1] and predicts tokens[1:]
    answers: np.ndarray  # indices into tokens of the answer tokens (each >= 1)
    facts: np.ndarray    # for each answer, the index of the token holding it
    filler_targets: np.ndarray | None = None  # indices of the filler tokens training also predicts

    @property
    def distances(self) -> np.ndarray:
        return self.answers - 1 - self.facts


@dataclass(frozen=True)
class Task:
    make: Callable[..., Sample]  # (rng, n_tokens, distances) -> Sample
    question_len: int  # tokens of the question block at the end
    fact_len: int  # tokens of one fact
    n_facts: int
    holder: int  # offset in a fact of its first answer-holding token
    asks: tuple[int, int]  # the first and last token that ask for a fact's first holder, counted back from the end
    chance: float  # accuracy of a blind guess among the answers' alphabet (excluding the symbols already asked)
    fact: str = ""  # what the fact is, in words (the reports' task table)
    question: str = ""  # what the question asks


TASKS: dict[str, Task] = {}


def register(name: str, question_len: int, fact_len: int, n_facts: int, holder: int, asks: tuple[int, int],
             chance: float, fact: str, question: str):
    def wrap(fn):
        TASKS[name] = Task(fn, question_len, fact_len, n_facts, holder, asks, chance, fact, question)
        return fn
    return wrap


def place(rng: np.random.Generator, n_tokens: int, task: Task, distances: tuple[int, int] | None) -> np.ndarray:
    """Random non-overlapping starts of the task's facts before the question block; with `distances` =
    (lo, hi), every answer lies more than lo and at most hi tokens back from each token that may ask for it
    (a fact's holders and the tokens asking them are in step, so the first holder stands for all)."""
    first, last = 0, n_tokens - task.question_len - task.fact_len  # the range of a fact's start
    if distances is not None:
        lo, hi = distances
        first_ask, last_ask = n_tokens - task.asks[0], n_tokens - task.asks[1]
        first = max(first, last_ask - hi - task.holder)
        last = min(last, first_ask - lo - 1 - task.holder)
    free = last - first + 1 - task.n_facts * task.fact_len + (task.fact_len - 1)  # slack to spread among the gaps
    if free < 0:
        raise UserError(f"{task.n_facts} facts of {task.fact_len} tokens do not fit at distances {distances} "
                        f"in a sequence of {n_tokens}")
    gaps = np.sort(rng.choice(free + task.n_facts, task.n_facts, replace=False))  # stars and bars
    return first + gaps + np.arange(task.n_facts) * (task.fact_len - 1)


def filler(rng: np.random.Generator, n: int) -> np.ndarray:
    """Noise with local structure, as text has: two interleaved chains (even and odd positions), each token
    the symbol after the one two back with probability FOLLOW, else a fresh random symbol. Predicting it
    takes the token before the current one, so training on it forms a previous-token head, the first half
    of the induction circuit that copy, recall and passkey need (Olsson et al. 2022, arXiv 2209.11895).
    Over uniform noise no model of the track formed one in 6,000 steps (studies/tasks/recipe-search.md)."""
    fresh = rng.random(n) >= FOLLOW
    fresh[:2] = True
    start = rng.integers(len(FILLER), size=n)
    out = np.empty(n, dtype=np.int64)
    for parity in (0, 1):
        steps = np.arange(len(fresh[parity::2]))
        last_fresh = np.maximum.accumulate(np.where(fresh[parity::2], steps, 0))
        out[parity::2] = (start[parity::2][last_fresh] + steps - last_fresh) % len(FILLER)
    return FILLER[out]


def ask_each_once(rng: np.random.Generator, n: int, n_facts: int) -> tuple[np.ndarray, np.ndarray]:
    """The question block's order (a permutation of the facts) and its answer indices: key, value, key, ..."""
    return rng.permutation(n_facts), n - 2 * n_facts + 1 + 2 * np.arange(n_facts)


@register("copy", question_len=8, fact_len=8, n_facts=1, holder=1, asks=(8, 8),
          chance=float(np.mean([1 / (16 - j) for j in range(1, 8)])), fact="a span of 8 distinct values",
          question="the span again: its tokens after the first (induction)")
def copy_task(rng, n, distances=None):
    span = rng.choice(VALUES, 8, replace=False)
    tokens = filler(rng, n)
    (p,) = place(rng, n, TASKS["copy"], distances)
    tokens[p:p + 8] = span
    tokens[n - 8:] = span
    answers = np.arange(n - 7, n)  # the first token of the repeat is not predictable
    return Sample(tokens, answers, p + np.arange(1, 8))


@register("recall", question_len=16, fact_len=2, n_facts=8, holder=1, asks=(16, 2), chance=1 / 16,
          fact="8 key-value pairs, two tokens each", question="every key once, answered by its value (MQAR, Zoology)")
def recall_task(rng, n, distances=None):
    keys = rng.choice(KEYS, 8, replace=False)
    values = rng.choice(VALUES, 8)
    tokens = filler(rng, n)
    starts = place(rng, n, TASKS["recall"], distances)
    tokens[starts], tokens[starts + 1] = keys, values
    order, answers = ask_each_once(rng, n, 8)
    tokens[answers - 1], tokens[answers] = keys[order], values[order]
    return Sample(tokens, answers, starts[order] + 1)


@register("passkey", question_len=6, fact_len=6, n_facts=1, holder=1, asks=(6, 6),
          chance=float(np.mean([1 / (10 - j) for j in range(5)])), fact="a KEY marker and 5 distinct digits",
          question="KEY, answered by the digits (Mohtashami & Jaggi)")
def passkey_task(rng, n, distances=None):
    digits = rng.choice(VALUES[:10], 5, replace=False)
    tokens = filler(rng, n)
    (p,) = place(rng, n, TASKS["passkey"], distances)
    tokens[p], tokens[p + 1:p + 6] = KEY, digits
    tokens[n - 6], tokens[n - 5:] = KEY, digits
    return Sample(tokens, np.arange(n - 5, n), p + np.arange(1, 6))


@register("recall1", question_len=16, fact_len=1, n_facts=8, holder=0, asks=(16, 2), chance=1 / 4,
          fact="8 pairs, each fused into one token",
          question="every key once, by a question token of its own, answered by its value (single hop)")
def single_hop_recall_task(rng, n, distances=None):
    keys = rng.choice(16, 8, replace=False)
    values = rng.choice(4, 8)
    tokens = filler(rng, n)
    starts = place(rng, n, TASKS["recall1"], distances)
    tokens[starts] = PAIRS + 4 * keys + values
    order, answers = ask_each_once(rng, n, 8)
    tokens[answers - 1], tokens[answers] = ASKS[keys[order]], VALUES[values[order]]
    return Sample(tokens, answers, starts[order])


@register("passkey1", question_len=2, fact_len=1, n_facts=1, holder=0, asks=(2, 2), chance=1 / 16,
          fact="one fused passkey token", question="QUERY, answered by its value (single hop)")
def single_hop_passkey_task(rng, n, distances=None):
    value = int(rng.integers(16))
    tokens = filler(rng, n)
    (p,) = place(rng, n, TASKS["passkey1"], distances)
    tokens[p] = PASSES + value
    tokens[n - 2], tokens[n - 1] = QUERY, VALUES[value]
    return Sample(tokens, np.array([n - 1]), np.array([p]))


def task_mix(source: str) -> dict[str, float]:
    """{task: weight} of a `tasks` or `tasks:a,b*3` source, in registry order: training draws each sequence's
    task with probability proportional to its weight (1 unless `*W` follows the name); a UserError for an
    unknown name, a name given twice or a weight that is not a positive number."""
    if not is_task_source(source):
        raise UserError(f"data.source {source!r} is not a task source (tasks or tasks:NAME,...)")
    if source == "tasks":
        return dict.fromkeys(TASKS, 1.0)
    mix = {}
    for item in source.split(":", 1)[1].split(","):
        name, _, weight = (part.strip() for part in item.partition("*"))
        if name not in TASKS:
            raise UserError(f"data.source {source!r}: unknown task {name or '(none given)'!r}; choose from "
                            f"{', '.join(TASKS)} (e.g. tasks:recall1,passkey1, tasks:copy,recall*3, or tasks for all)")
        if name in mix:
            raise UserError(f"data.source {source!r}: {name} is named twice; give it once, with its weight")
        try:
            mix[name] = float(weight or 1)
        except ValueError:
            mix[name] = math.nan
        if not 0 < mix[name] < math.inf:
            raise UserError(f"data.source {source!r}: the weight of {name} must be a positive number "
                            f"(e.g. {name}*3), got {weight!r}")
    return {t: mix[t] for t in TASKS if t in mix}


def task_names(source: str) -> list[str]:
    """The tasks of a task source, in registry order (see task_mix)."""
    return list(task_mix(source))


def sample(task: str, n_tokens: int, seed: int, index: int, distances: tuple[int, int] | None = None,
           start_token: bool = False) -> Sample:
    """One sequence of `n_tokens`, a pure function of its arguments; with `start_token`, the task's sequence of
    n_tokens - 1 behind START (a fixed first token: a head attending evenly over the prefix gives it the share
    1/(t+1) at position t, a position a model without one can read)."""
    rng = np.random.default_rng([seed, index, list(TASKS).index(task), n_tokens, *(distances or ())])
    s = TASKS[task].make(rng, n_tokens - start_token, distances)
    if start_token:
        s = Sample(np.concatenate([[START], s.tokens]), s.answers + 1, s.facts + 1)
    chosen = (rng.random(n_tokens) < FILLER_TARGETS) & IS_FILLER[s.tokens]
    s.filler_targets = np.flatnonzero(chosen[1:]) + 1  # the first token has nothing before it to predict it
    return s


def to_batch(samples: list[Sample], filler_targets: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y), each (B, n - 1) int64: y is x shifted by one and -1 except at the answers (and, for
    training, at the samples' filler targets)."""
    tokens = np.stack([s.tokens for s in samples])
    y = np.full_like(tokens, -1)
    for i, s in enumerate(samples):
        targets = np.concatenate([s.answers, s.filler_targets]) if filler_targets else s.answers
        y[i, targets] = tokens[i, targets]
    return torch.from_numpy(tokens[:, :-1].copy()), torch.from_numpy(y[:, 1:].copy())


class TaskData:
    """A task source as training batches and validation batches, in the shape TokenData gives them."""

    def __init__(self, cfg: DataConfig):
        mix = task_mix(cfg.source)
        self.start_token, self.curriculum = cfg.start_token, cfg.curriculum
        self.tasks = list(mix)
        weights = np.array(list(mix.values()))
        # None: uniform; else the cumulative weights, as Generator.choice(p=...) builds them at every call
        self.cdf = None if (weights == weights[0]).all() else np.cumsum(weights / weights.sum())
        if self.cdf is not None:
            self.cdf /= self.cdf[-1]
        needed = VOCAB_SIZE + cfg.start_token
        if cfg.vocab_size < needed:
            raise UserError(f"data.vocab_size must be at least {needed} for task sources (their vocabulary"
                            f"{', with the start token' if cfg.start_token else ''}), got {cfg.vocab_size}")

    def batch(self, batch_size: int, seq_len: int, seed: int, step: int, micro_step: int = 0,
              micro_steps: int = 1, rank: int = 0, world_size: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """Sequences of the global batch's slice (micro_step, rank), each a task chosen at random: the
        same global batch whatever the split over processes and micro-steps (see TokenData.batch)."""
        first = (micro_step * world_size + rank) * batch_size
        distances = self.distances_at(step, seq_len + 1)
        samples = []
        for index in range(first, first + batch_size):
            global_index = step * batch_size * micro_steps * world_size + index
            samples.append(sample(self.task_at(seed, global_index), seq_len + 1, seed, global_index, distances,
                                  self.start_token))
        return to_batch(samples, filler_targets=True)

    def distances_at(self, step: int, n_tokens: int) -> tuple[int, int] | None:
        """data.curriculum's bound on the training facts' distances at `step`: (0, D) at step 0, growing linearly
        to the whole sequence at step S; None (facts anywhere) from there on, or without a curriculum."""
        if self.curriculum is None:
            return None
        start, steps = self.curriculum
        bound = round(start + (n_tokens - start) * step / steps)
        return (0, bound) if bound < n_tokens - 1 else None

    def task_at(self, seed: int, global_index: int) -> str:
        """The task of a training sequence, drawn in proportion to the mix's weights."""
        rng = np.random.default_rng([seed, global_index])
        if self.cdf is None:
            return self.tasks[rng.integers(len(self.tasks))]
        return self.tasks[int(np.searchsorted(self.cdf, rng.random(), side="right"))]  # choice(p=...)'s draw

    def validation(self, seq_len: int, max_tokens: int, batch_size: int) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
        """Fixed (task, x, y) batches, the same number of sequences for each task, about max_tokens in all."""
        for task in self.tasks:
            spec = TASKS[task]
            needed = spec.question_len + spec.n_facts * spec.fact_len + self.start_token
            if seq_len < needed:
                raise UserError(f"model.max_seq_len {seq_len} is too short for the {task} task, which needs "
                                f"at least {needed} tokens")
        per_task = max(1, max_tokens // (seq_len * len(self.tasks)))
        out = []
        for task in self.tasks:
            for i in range(0, per_task, batch_size):
                samples = [sample(task, seq_len + 1, VAL_SEED, j, start_token=self.start_token)
                           for j in range(i, min(per_task, i + batch_size))]
                out.append((task, *to_batch(samples)))
        return out


def bag_solver(drawn) -> np.ndarray:
    """The accuracy, by the order the answers are asked in, of a solver that knows the answers the facts hold
    but not which question each belongs to: it answers with one of the answers not yet given, at random (the
    exact expectation). It scores 1/(n - j) on the j-th of n distinct answers, 100% on a one-answer task; a
    run near it has learned what the facts hold, not which key holds what."""
    answers = np.stack([s.tokens[s.answers] for s in drawn])  # (samples, n)
    n = answers.shape[1]
    return np.mean([(answers[:, j:] == answers[:, j:j + 1]).sum(1) / (n - j) for j in range(n)], axis=1)


@functools.cache  # a pure function of its arguments; results.md is rendered again after every measurement
def values_only_level(task: str, length: int, n: int = 256) -> float | None:
    """bag_solver's mean accuracy on n validation sequences of `length` tokens: what reading which values a sequence's
    facts hold, but not which question each answers, scores; None for a task of one answer (it would score 100%)."""
    drawn = [sample(task, length + 1, VAL_SEED, i) for i in range(n)]
    return None if len(drawn[0].answers) == 1 else float(np.mean(bag_solver(drawn)))
