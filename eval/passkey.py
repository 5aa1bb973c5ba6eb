"""Passkey retrieval in repeated filler, by length and depth: the test of Mohtashami & Jaggi (Landmark Attention,
arXiv 2305.16300) as the PI paper (Chen et al., arXiv 2306.15595, section 3) and YaRN (Peng et al., arXiv 2309.00071,
section 4) run it, drawn as a needle-in-a-haystack heat map.

    python -m eval.passkey runs/study/seed1/rope [hf:PATH ...] [--multiples 1,2,4,8,16] [--lengths 4096,8192] \
        [--depths 0,0.25,0.5,0.75,1] [--trials 20] [--scaling none,yarn] [--out runs/eval/passkey]

A prompt of `length` tokens with the tokens generated after it: the task's opening line, the filler sentences
repeated, "The pass key is NNNNN. Remember it. NNNNN is the pass key." (a 5-digit key, or a word where the tokenizer
has no digit tokens) at a depth of the filler (0: first, 1: last, between two repetitions), more filler, and "What is
the pass key? The pass key is". A trial is right when the key is in the text the model generates greedily after the
question (its tokens and EXTRA_TOKENS more, room for a lead-in such as " the"), as the papers' scripts read the
answer; `key_tokens` is the mean share of the key's tokens that are the model's top prediction after the key's tokens
before them, partial retrieval; `held` (5-digit keys) counts the trials whose every digit is the model's top
prediction after the answer's tokens before it: the key held, whatever the greedy answer starts with (a model that
answers " the pass key. The pass key is ..." never reaches the digits it holds).
The keys are drawn from --seed, the same for every model, depth and scaling. Depths share the filler before their
key: its keys and values are computed once per length, and every trial continues them (deepest key first), so a
cell costs the tokens after its key; each row is written as its depth is measured.

A model is a run directory or hf:PATH. Scalings are chosen as in eval.probe: an unscaled RoPE run gets each static
method of --scaling with s = max(1, length / L) (s = 1 is plain RoPE: that row repeats plain RoPE's numbers and
names it in same_as), and each dynamic one (dynamic, dynamic-yarn) with s following the length, decoded past L a
few tokens at a time as generation decodes (eval.harness.read_cached); a fine-tuned run its own. --context-method applies a training-free context method to every
cell, as in eval.extrapolation (--scaling then defaults to none). Writes passkey.json (one row per model, scaling,
length and depth, written as each is measured, naming the weights it was measured on (model_identity); --resume
measures only the missing ones, and of a row a kill cut short only the trials not yet in passkey-trials.jsonl from the
same weights), passkey.md and passkey.png (a heat map
per model and scaling, accuracy averaged over seeds).
"""
from __future__ import annotations

import hashlib
import json
import random
import statistics
import time
from typing import Callable, Iterator

import torch
from tqdm import tqdm

from checkpoint import load_model, load_tokenizer
from config import ContextConfig, UserError
from device import autocast_dtype, pick_device
from eval.harness import (CONTEXT_HELP, Run, check_applicable, context_settings, evaluate, evaluator_parser, parse_depths,
                          parse_scalings, read_cached, read_runs, run_lengths, scalings_option)
from eval.probe import key_words, model_variants
from model.attention import KVCache
from model.context import parse_checked
from eval.results.passkey import RESULTS, markdown, row_key, write_report
from eval.results.rows import previous_rows

# The prompt's text, as Mohtashami & Jaggi give it and the PI and YaRN papers reuse it.
OPENING = ("There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
           "I will quiz you about the important information there.")
FILLER = " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
FACT = " The pass key is {key}. Remember it. {key} is the pass key."
QUESTION = " What is the pass key? The pass key is"
ANSWER = " {key}"

DEFAULT_MULTIPLES = "1,2,4,8,16"
DEFAULT_DEPTHS = "0,0.25,0.5,0.75,1"
DEFAULT_TRIALS = 20
EXTRA_TOKENS = 4  # generated beyond the key's own tokens, for a lead-in such as " the" or ":"
TRIALS = "passkey-trials.jsonl"  # the finished trials of unfinished rows (TrialLog)
DIGITS = "5 digits"  # the keys where the tokenizer has digit tokens (draw_keys)


def has_digits(tokenizer) -> bool:
    """Whether the tokenizer holds each digit as a token of its own (not as a byte fallback)."""
    return all(len(ids) == 1 and tokenizer.piece(ids[0]).strip() == d
               for d, ids in ((d, tokenizer.encode(d)) for d in "0123456789"))


def draw_keys(tokenizer, seed: int, n: int) -> tuple[str, list[str]]:
    """(what a key is, n keys), the same for every model whose tokenizer takes them: 5-digit numbers, or, for a
    tokenizer without digit tokens (a small run's, trained on books), words it holds as one token, which a
    model has seen (eval.probe's key_words; a digit there is a byte it has rarely met)."""
    rng = random.Random(seed)
    if has_digits(tokenizer):
        return DIGITS, [str(k) for k in rng.sample(range(10_000, 100_000), n)]
    words = [w for w, _ in key_words(tokenizer)]
    if not words:
        raise UserError("the tokenizer holds neither digits nor whole words as single tokens: no passkey to ask")
    return "a word", [rng.choice(words) for _ in range(n)]


class Prompts:
    """A tokenizer's pieces of the prompt, and where each depth puts the key in a prompt of `length` tokens."""

    def __init__(self, tokenizer, seed: int, trials: int):
        self.head = ([] if tokenizer.bos_id is None else [tokenizer.bos_id]) + tokenizer.encode(OPENING)
        self.filler = tokenizer.encode(FILLER)
        self.question = tokenizer.encode(QUESTION)
        self.decode = tokenizer.decode
        self.kind, keys = draw_keys(tokenizer, seed, trials)
        self.keys = keys
        self.facts = [tokenizer.encode(FACT.format(key=k)) for k in keys]
        self.answers = [tokenizer.encode(ANSWER.format(key=k)) for k in keys]
        # all but the filler in the longest trial, its generated tokens included: every trial's key sits at the same
        # place (a shared prefix), and no token goes past position length - 1
        self.fixed = len(self.head) + len(self.question) + max(map(len, self.facts)) + max(map(len, self.answers)) \
            + EXTRA_TOKENS

    def filler_tokens(self, n: int) -> list[int]:
        return (self.filler * (n // len(self.filler) + 1))[:n]

    def fits(self, length: int) -> bool:
        """A prompt of `length` tokens holds at least one repetition of the filler."""
        return length - self.fixed >= len(self.filler)

    def key_at(self, length: int, depth: float) -> int:
        """Filler tokens before the key: `depth` of the filler, rounded to whole repetitions."""
        room = length - self.fixed
        if not self.fits(length):
            raise UserError(f"a passkey prompt of {length} tokens leaves room for less than one filler "
                            f"repetition ({len(self.filler)} tokens); measure longer lengths")
        return round(depth * (room // len(self.filler))) * len(self.filler)

    def trial(self, i: int, length: int, at: int) -> tuple[list[int], list[int]]:
        """(the tokens after the shared prefix up to the question's end, the answer's tokens) of trial i: with the
        key's tokens and EXTRA_TOKENS generated after them, `length` tokens."""
        fact, answer = self.facts[i], self.answers[i]
        after = length - len(self.head) - at - len(fact) - len(self.question) - len(answer) - EXTRA_TOKENS
        return fact + self.filler_tokens(at + after)[at:] + self.question, answer


def model_identity(model, device) -> str:
    """What a trial is measured on: a digest of the model's weights and the precision of its products. A trial log
    outlives the machine it was written on (studies/smollm2 commits one), so a fine-tune trained again that came
    out different, or the same weights run in bf16 on a GPU, must not finish another model's rows."""
    digest = hashlib.sha256()
    for name, p in model.named_parameters():
        digest.update(name.encode())
        digest.update(p.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    precision = autocast_dtype(device) or next(model.parameters()).dtype
    return f"sha256:{digest.hexdigest()[:16]} {str(precision).removeprefix('torch.')}"


class TrialLog:
    """The finished trials of rows not yet finished, one JSON line each in --out/TRIALS, so that a killed
    evaluation of long prompts (a 32,768-token cell of SmolLM2 is hours on a CPU) resumes trial by trial. A trial
    counts for a row only under the same keys and the same model (model_identity). Without --resume the file starts
    empty. A row's trials leave it once the row is written; the trials of rows another evaluation left unfinished
    (another run's, written to the same --out) stay, and the file goes when none is left."""

    def __init__(self, path, resume: bool):
        self.path = path
        # (row_key, the keys of its trials, model_identity) -> {trial: ((generated, teacher), seconds)}: the keys fix
        # a row's prompts
        self.done: dict[tuple, dict[int, tuple]] = {}
        if resume and path.exists():
            for line in path.read_text().splitlines():
                try:
                    r = json.loads(line)
                    trial = (r["generated"], r["teacher"]), float(r["seconds"])
                    self.done.setdefault((tuple(r["row"]), tuple(r["keys"]), r["model"]), {})[r["trial"]] = trial
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut by a kill
        else:
            path.unlink(missing_ok=True)

    def finished(self, row: tuple, keys: list[str], model: str) -> dict[int, tuple]:
        """Trial -> (generated, teacher) of the trials of `row` logged under the same keys and model."""
        return {i: trial for i, (trial, _) in self.done.get((row, tuple(keys), model), {}).items()}

    def seconds(self, row: tuple, keys: list[str], model: str) -> float:
        """What the logged trials of `row` took when they were measured."""
        return sum(seconds for _, seconds in self.done.get((row, tuple(keys), model), {}).values())

    def add(self, row: tuple, keys: list[str], model: str, i: int, trial: tuple, seconds: float) -> None:
        self.done.setdefault((row, tuple(keys), model), {})[i] = trial, seconds
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(self.line((row, tuple(keys), model), i, trial, seconds))

    @staticmethod
    def line(key: tuple, i: int, trial: tuple, seconds: float) -> str:
        row, keys, model = key
        return json.dumps({"row": list(row), "keys": list(keys), "model": model, "trial": i, "generated": trial[0],
                           "teacher": trial[1], "seconds": round(seconds, 2)}) + "\n"

    def close(self, written: set[tuple]) -> None:
        """Keep only the trials of rows not among the `written` row keys; no file when none is left."""
        left = {key: trials for key, trials in self.done.items() if key[0] not in written}
        if not left:
            self.path.unlink(missing_ok=True)
            return
        self.path.write_text("".join(self.line(key, i, trial, seconds) for key, trials in left.items()
                                     for i, (trial, seconds) in sorted(trials.items())))


def predictions(model, prompts: Prompts, length: int, depths: list[float], device,
                finished: Callable[[float], dict[int, tuple]] = lambda depth: {},
                on_trial: Callable[[float, int, tuple], None] = lambda depth, i, trial: None,
                ) -> Iterator[tuple[float, list]]:
    """(depth, for each trial (the tokens greedy decoding generates after the question, the key's tokens plus
    EXTRA_TOKENS; the top prediction of each key token after the key's tokens before it)), deepest key first. The
    filler before the deepest key is prefilled once; a trial continues the prefix before its key and is rewound
    to it (the keys and values of a prefix do not depend on what follows it), so each depth costs its trials'
    tokens after the key. finished(depth) gives the trials measured before (TrialLog), which are not measured
    again; on_trial is told of each new one."""
    cache = KVCache(model.cfg.n_layers, capacity=length)

    def forward(tokens: list[int], last_only: bool):
        return read_cached(model, tokens, cache, device, last_only).float().argmax(-1).tolist()

    starts = {d: len(prompts.head) + prompts.key_at(length, d) for d in depths}
    forward(prompts.head + prompts.filler_tokens(max(starts.values()) - len(prompts.head)), last_only=True)
    for depth in sorted(depths, reverse=True):
        cache.rewind(starts[depth])
        out, before = [], finished(depth)
        for i in range(len(prompts.keys)):
            if i in before:
                out.append(before[i])
                continue
            body, answer = prompts.trial(i, length, starts[depth] - len(prompts.head))
            generated = forward(body, last_only=True)
            asked = len(cache)
            while len(generated) < len(answer) + EXTRA_TOKENS:
                generated += forward(generated[-1:], last_only=True)
            cache.rewind(asked)
            teacher = generated[:1] + (forward(answer[:-1], last_only=False) if len(answer) > 1 else [])
            out.append((generated, teacher))
            on_trial(depth, i, out[-1])
            cache.rewind(starts[depth])
        yield depth, out


def held(prompts: Prompts, trials: list[tuple]) -> int:
    """Trials whose every digit of the key is the top prediction after the answer's tokens before it (each digit is a
    token of its own: has_digits), from each trial's (generated, teacher)."""
    return sum(teacher[-len(key):] == answer[-len(key):]
               for key, answer, (_, teacher) in zip(prompts.keys, prompts.answers, trials))


def fitting(run: Run, prompts: Prompts, lengths: list[int]) -> list[int]:
    """The lengths that hold a passkey prompt, the others left out with a note (a UserError where none does)."""
    short = [n for n in lengths if not prompts.fits(n)]
    least = f"a passkey prompt needs {prompts.fixed + len(prompts.filler)} tokens at least"
    if short:
        print(f"{run.path}: left out lengths {', '.join(map(str, short))}: {least}")
    if len(short) == len(lengths):
        raise UserError(f"{run.path}: every length of --multiples is too short ({least}); give longer --multiples")
    return [n for n in lengths if prompts.fits(n)]


def measure_run(run: Run, methods: list[str], lengths: list[int], depths: list[float], seed: int, trials: int,
                device, previous: list[dict], on_row, log: TrialLog, context: ContextConfig | None = None,
                fitting_only: bool = False) -> None:
    """Every (scaling, length, depth) row of one run not among the `previous` rows, handed to on_row as it is
    measured; a row whose model a previous row measured (s = 1 is plain RoPE) repeats its numbers. The context
    method, if any, is named in every label. `log` keeps each finished trial, and gives back those of a row a
    killed evaluation left unfinished. With `fitting_only` (lengths from --multiples), a length too short for the
    prompt is left out with a note rather than refused."""
    prompts = Prompts(load_tokenizer(run.path), seed, trials)
    if fitting_only:
        lengths = fitting(run, prompts, lengths)
    base = {"run": run.name, "seed": run.seed, "position": run.position, "train_length": run.train_length,
            "keys": prompts.kind}
    measured: dict[tuple, dict[float, dict]] = {}  # (model, length) -> {depth: the numbers of a measured row}
    identity = ""  # model_identity, once a model is loaded
    done = {row_key(r) for r in previous}
    for r in previous:
        if (r["run"], r["seed"]) != (run.name, run.seed) or "seconds" not in r:
            continue  # another run's row, or one that repeats another row's numbers
        logged = log.finished(row_key(r), prompts.keys, r.get("model"))
        if prompts.kind == DIGITS and "held" not in r and len(logged) == r["trials"]:  # a row from before `held`
            r["held"] = held(prompts, [logged[i] for i in sorted(logged)])
        variants = dict(model_variants(run, methods, r["length"], context))
        if r["scaling"] in variants:
            measured.setdefault((repr(variants[r["scaling"]]), r["length"]), {})[r["depth"]] = r

    def emit(row: dict, known: dict) -> None:  # the row with its depth's numbers, measured under its label or another's
        numbers = known[row["depth"]]
        on_row({**row, **{k: numbers[k] for k in ("value", "hits", "trials", "key_tokens", "held") if k in numbers},
                "context": numbers.get("context"),  # rows from before context methods have none
                **({"model": numbers["model"]} if "model" in numbers else {}),  # and from before model_identity
                **({"seconds": numbers["seconds"]} if numbers["scaling"] == row["scaling"]
                   else {"same_as": numbers["scaling"]})})

    for length in lengths:
        for label, scaling in model_variants(run, methods, length, context):
            rows = [{**base, "scaling": label, "length": length, "multiple": round(length / run.train_length, 4),
                     "depth": d, "value": None} for d in depths]
            rows = {r["depth"]: r for r in rows if row_key(r) not in done}
            known = measured.setdefault((repr(scaling), length), {})
            missing = [d for d in rows if d not in known]
            if missing:
                model = load_model(run.path, scaling=scaling, device=device, context=context)
                limit = model.position.max_positions
                if limit is not None and length > limit:
                    for r in rows.values():
                        on_row({**r, "note": f"{run.position} positions stop at {limit - 1}"})
                    continue
                identity = identity or model_identity(model, device)  # the weights do not change with the scaling
                clock = [0.0]  # when the last trial ended
                # a trial at 32,768 tokens takes minutes on a CPU: the keys of the cell being measured (a terminal's)
                bar = tqdm(total=len(prompts.keys), desc=f"{label}, {length:,} tokens, the filler before the keys",
                           unit="key", leave=False, dynamic_ncols=True, disable=None)

                def on_trial(d, i, trial):
                    now = time.perf_counter()
                    log.add(row_key(rows[d]), prompts.keys, identity, i, trial, now - clock[0])
                    clock[0] = now
                    bar.update()

                def finished(d):  # asked as depth d's trials begin, after the prefill: a trial's seconds are its own
                    clock[0] = time.perf_counter()
                    before = log.finished(row_key(rows[d]), prompts.keys, identity)
                    bar.reset(total=len(prompts.keys))
                    bar.update(len(before))
                    bar.set_description(f"{label}, {length:,} tokens, key at depth {d:g}")
                    return before
                with bar:
                    for d, cell in predictions(model, prompts, length, missing, device, finished, on_trial):
                        hits = sum(key in prompts.decode(generated) for key, (generated, _) in zip(prompts.keys, cell))
                        shares = [statistics.fmean(p == a for p, a in zip(teacher, answer))
                                  for (_, teacher), answer in zip(cell, prompts.answers)]
                        known[d] = {"scaling": label, "value": round(hits / len(cell), 4), "hits": hits,
                                    "trials": len(cell), "key_tokens": round(statistics.fmean(shares), 4),
                                    **({"held": held(prompts, cell)} if prompts.kind == DIGITS else {}),
                                    "seconds": round(log.seconds(row_key(rows[d]), prompts.keys, identity), 2),
                                    "context": context_settings(model, context), "model": identity}
                        emit(rows[d], known)
            for d, r in rows.items():
                if d not in missing:
                    emit(r, known)


# ----------------------------------------------------------------------------- report


# ----------------------------------------------------------------------------- command line

def main(argv: list[str] | None = None) -> list[dict]:
    parser = evaluator_parser(__doc__, "run directories, or hf:PATH (a transformers checkpoint)", "runs/eval/passkey",
                              f"keep the rows already in --out/{RESULTS} and measure only the missing ones")
    parser.add_argument("--multiples", default=DEFAULT_MULTIPLES,
                        help=f"prompt lengths as multiples of each model's L (default {DEFAULT_MULTIPLES})")
    parser.add_argument("--lengths", default=None, help="prompt lengths in tokens, instead of --multiples")
    parser.add_argument("--depths", default=DEFAULT_DEPTHS,
                        help=f"where the key is stated, as shares of the filler in [0, 1] (default {DEFAULT_DEPTHS})")
    parser.add_argument("--trials", type=int, default=DEFAULT_TRIALS,
                        help=f"keys per length and depth (default {DEFAULT_TRIALS})")
    parser.add_argument("--scaling", default=None,
                        help="RoPE scalings for unscaled rope models: a static one at s = max(1, length / L), a "
                             "dynamic one following the length as it decodes (default none,yarn; none with "
                             "--context-method)")
    parser.add_argument("--context-method", default="none", help=CONTEXT_HELP)
    parser.add_argument("--seed", type=int, default=0, help="seed of the keys (the same for every model)")
    args = parser.parse_args(argv)

    def work(rows: list[dict], lock) -> None:
        context = parse_checked(args.context_method, "--context-method")
        methods = parse_scalings(scalings_option(args.scaling, context, "none,yarn"))
        depths = parse_depths(args.depths, "the filler")
        if args.trials < 1:
            raise UserError(f"--trials must be >= 1, got {args.trials}")
        lock()
        runs = read_runs(args.runs)
        check_applicable(runs, methods, context)
        if args.resume:
            rows.extend(previous_rows(args.out / RESULTS, "eval.passkey", "depth"))
        previous = list(rows)
        device = pick_device(args.device, "--device")
        log = TrialLog(args.out / TRIALS, args.resume)

        def measured(row):  # written at once: a killed evaluation keeps it
            rows.append(row)
            write_report(rows, args.out, tables=False)
        for run in tqdm(runs, unit="run", dynamic_ncols=True, disable=None):
            measure_run(run, methods, run_lengths(run, args.lengths, args.multiples), depths, args.seed, args.trials, device, previous, measured, log, context,
                        fitting_only=args.lengths is None)
        log.close({row_key(r) for r in rows})

    rows = evaluate(args.out, "eval.passkey", work, lambda rows: write_report(rows, args.out))
    print(markdown(rows))
    print(f"wrote {args.out}/{RESULTS}, passkey.md, passkey.png")
    return rows


if __name__ == "__main__":
    main()
