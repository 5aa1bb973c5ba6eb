"""RULER's synthetic tasks that need no download (Hsieh et al., "RULER: What's the Real Context Size of Your
Long-Context Language Models?", arXiv 2404.06654, section 3), generated natively for any tokenizer at any length.

    python -m eval.ruler runs/study/seed1/rope [hf:PATH ...] [--multiples 1,2,4] [--lengths 4096,8192] \
        [--tasks niah_single_noise,...] [--depths 0,0.5,1] [--trials 10] [--scaling none] [--data SOURCE] \
        [--out runs/eval/ruler]

Tasks (TASKS): needles "the value of KEY is VALUE." in a haystack (RULER's niah): niah_single_noise (one needle in a
repeated filler sentence), niah_single_book (one needle in book text: the run's validation text, or --data, encoded
with the model's tokenizer), niah_multikey (four needles, one asked, three distractors), niah_multivalue (four values
of one key, all asked), niah_multiquery (four needles, all asked); the needles sit together at a depth of the haystack
(0: first, 1: last; in the filler, between whole repetitions). vt (RULER's variable tracking: a chain of five
assignments "VAR a = 12345.", "VAR b = a.", ... spread evenly through the filler; the answer: every name that holds
the value), cwe (common word extraction: ten words repeated often among words repeated rarely; the answer: the ten)
and fwe (frequent word extraction: words drawn from a Zipf law, alpha = 2 as RULER draws them; the answer: the three
most frequent). Keys and names are words the tokenizer holds as one token (eval.probe.key_words); values are 7-digit
numbers where the tokenizer has digit tokens (RULER's values), else such words. A prompt is a pure function of
(--seed, trial, length, depth), the same for every model with the same tokenizer, and with the tokens the model
generates (the task's BUDGET) exactly `length` tokens.

Scoring is RULER's string_match_all for every task here (RULER's constants give it to niah, vt, cwe and fwe alike;
string_match_part is for its QA tasks): a trial's score is the share of its expected strings found (case-insensitive)
in the greedy answer, and a row's score the mean over trials, times 100. The greedy answer is decoded through the KV
cache under every scaling and context method, as in eval.passkey. Scalings are chosen as in eval.passkey (default
none; --scaling none,yarn for s = max(1, length / L); dynamic and dynamic-yarn follow the length as it decodes); --context-method applies a training-free context method.

Writes --out/results.json (one row per run, scaling, task, length and depth; --resume measures only the missing rows,
and of a row a kill cut short only the trials not yet in ruler-trials.jsonl) and results.md: score by length per task,
the mean over tasks, and the two effective lengths (eval/results/ruler.py).
"""
from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from tqdm import tqdm

from checkpoint import load_model, load_tokenizer
from config import ContextConfig, UserError
from data.tokens import TokenData
from device import pick_device
from eval.harness import (CONTEXT_HELP, DATA_HELP, Run, check_applicable, check_data_option, context_settings, evaluate,
                          evaluator_parser, parse_depths, parse_scalings, read_cached, read_runs, run_lengths,
                          scalings_option, text_shards)
from eval.passkey import FILLER, TrialLog, has_digits, model_identity
from eval.probe import key_words, model_variants
from eval.results.ruler import RESULTS, markdown, row_key, write_report
from eval.results.rows import previous_rows
from model.attention import KVCache
from model.context import parse_checked

OPENING = ("Some facts are hidden in the long text below. Read it all and remember them: a question about them "
           "follows the text.")
NEEDLE = " The value of {key} is {value}."
ASK_ONE = " Question: what is the value of {key}? Answer: the value of {key} is"
ASK_VALUES = " Question: what are all the values of {key}? Answer: the values of {key} are"
ASK_KEYS = " Question: what are the values of {keys}? Answer: the values are"
VT_OPENING = "Memorize every assignment in the text below, and follow the names through it."
VT_FIRST = " VAR {name} = {value}."
VT_NEXT = " VAR {name} = {previous}."
VT_ASK = " Question: which names hold the value {value}? Answer: the names that hold {value} are"
CWE_OPENING = "Below is a list of words. Some of them occur far more often than the others."
CWE_ASK = " Question: which ten words occur most often in the list above? Answer: the ten most common words are"
FWE_OPENING = "Below is a text of coded words. Count how often each one occurs."
FWE_ASK = " Question: which three coded words occur most often in the text above? Answer: the three are"

N_NEEDLES = 4  # niah_multikey, multivalue, multiquery: RULER's num_needle_k / num_needle_v / num_needle_q of 4
VT_HOPS = 4  # RULER's num_hops of 4 (one chain, five names)
CWE_WORDS, CWE_COMMON, CWE_RARE = 10, 30, 3  # RULER's num_cw, freq_cw, freq_ucw (fewer where they don't fit)
FWE_ALPHA, FWE_TOP = 2.0, 3  # RULER's zipf alpha and the three words asked
# new tokens decoded greedily per task (RULER's are 128 niah, 30 vt, 120 cwe, 50 fwe; shorter here for tiny models'
# short contexts, still room for every expected string)
BUDGET = {"niah_single_noise": 16, "niah_single_book": 16, "niah_multikey": 16, "niah_multivalue": 48,
          "niah_multiquery": 48, "vt": 32, "cwe": 64, "fwe": 24}
TASKS = list(BUDGET)
NIAH = [t for t in TASKS if t.startswith("niah")]
DEFAULT_MULTIPLES = "1,2,4"
DEFAULT_DEPTHS = "0,0.5,1"
DEFAULT_TRIALS = 10
TRIALS = "ruler-trials.jsonl"
WORDS = 400  # the candidate words (one token each)
SHARED_PREFIX = 512  # tokens of a common prefix past which the trials of a row read it once (greedy_trials)


@lru_cache(maxsize=8)
def _words(tokenizer) -> tuple[str, ...]:
    """The candidate keys, names and listed words: whole words the tokenizer holds as one token (eval.probe's
    key_words), and where it holds fewer than WORDS (a small run's tokenizer) coded words made of two of them, as
    RULER's fwe codes its words."""
    single = [w for w, _ in key_words(tokenizer, WORDS)]
    coded = [a + b for a in single for b in single if a != b]
    return tuple(dict.fromkeys(single + coded))[:WORDS]


def string_match_all(answer: str, expected: list[str]) -> float:
    """RULER's string_match_all for one answer: the share of expected strings in it, case-insensitive."""
    return sum(e.lower() in answer.lower() for e in expected) / len(expected)


@dataclass
class Sample:
    prompt: list[int]  # length - budget tokens, ending in the question
    expected: list[str]
    needles: list[tuple[int, list[int]]]  # (where each needle's tokens start, its tokens), for the tests
    question: int = 0  # the question's tokens, at the prompt's end


class Tasks:
    """A tokenizer's prompts for every task; `book` gives the book-text haystack's tokens when asked (lazily)."""

    def __init__(self, tokenizer, seed: int, book=None):
        self.tok, self.seed, self.book = tokenizer, seed, book
        self.bos = [] if tokenizer.bos_id is None else [tokenizer.bos_id]
        self.filler = tokenizer.encode(FILLER)
        self.words = _words(tokenizer)
        self.pieces = {w: tokenizer.encode(f" {w}") for w in self.words}
        self.digits = has_digits(tokenizer)
        if len(self.words) < 2 * CWE_WORDS + 10:
            raise UserError(f"the tokenizer holds only {len(self.words)} whole words as single tokens: too few for "
                            f"RULER's keys, names and word lists")

    def rng(self, task: str, trial: int, length: int, depth: float | None) -> random.Random:
        return random.Random(f"{self.seed}/{task}/{trial}/{length}/{depth}")

    def values(self, rng: random.Random, n: int, taken: list[str]) -> list[str]:
        """n distinct values: 7-digit numbers, or words not among those `taken`."""
        if self.digits:
            return [str(v) for v in rng.sample(range(1_000_000, 10_000_000), n)]
        return rng.sample([w for w in self.words if w not in taken], n)

    def haystack(self, task: str, n: int) -> tuple[list[int], int]:
        """n haystack tokens, and the unit the needles are placed in (a filler repetition, or a token of a book)."""
        if task == "niah_single_book":
            tokens = self.book() if callable(self.book) else self.book
            if tokens is None or len(tokens) == 0:
                raise UserError("niah_single_book needs text: the run's data, or --data")
            return (list(tokens) * (n // len(tokens) + 1))[:n], 1
        return (self.filler * (n // len(self.filler) + 1))[:n], len(self.filler)

    def sample(self, task: str, trial: int, length: int, depth: float | None = None) -> Sample:
        if task not in BUDGET:
            raise UserError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
        rng = self.rng(task, trial, length, depth)
        room = length - BUDGET[task]
        if task in NIAH:
            return self.niah(task, rng, room, depth if depth is not None else 0.5, length)
        return getattr(self, task)(rng, room, length)

    def short(self, task: str, length: int, least: int) -> UserError:
        return UserError(f"a {task} prompt needs at least {least} tokens (its question and {BUDGET[task]} generated "
                         f"tokens included); {length} is too short: measure longer --lengths")

    def niah(self, task: str, rng: random.Random, room: int, depth: float, length: int) -> Sample:
        keys = rng.sample(self.words, N_NEEDLES if task in ("niah_multikey", "niah_multiquery") else 1)
        if task == "niah_multivalue":
            facts = [(keys[0], v) for v in self.values(rng, N_NEEDLES, keys)]
        else:
            facts = list(zip(keys, self.values(rng, len(keys), keys)))
        if task == "niah_multiquery":
            question, expected = ASK_KEYS.format(keys=", ".join(keys)), [v for _, v in facts]
        elif task == "niah_multivalue":
            question, expected = ASK_VALUES.format(key=keys[0]), [v for _, v in facts]
        else:  # single, or multikey: the first key asked, the others distractors
            question, expected = ASK_ONE.format(key=keys[0]), [facts[0][1]]
        rng.shuffle(facts)
        head, ask = self.bos + self.tok.encode(OPENING), self.tok.encode(question)
        needles = [self.tok.encode(NEEDLE.format(key=k, value=v)) for k, v in facts]
        fill = room - len(head) - len(ask) - sum(map(len, needles))
        hay, unit = self.haystack(task, max(fill, 0))
        if fill < unit:
            raise self.short(task, length, length - fill + unit)
        at = round(depth * (fill // unit)) * unit
        prompt, where = head + hay[:at], []
        for n in needles:
            where.append((len(prompt), n))
            prompt += n
        return Sample(prompt + hay[at:] + ask, expected, where, len(ask))

    def vt(self, rng: random.Random, room: int, length: int) -> Sample:
        names = rng.sample(self.words, VT_HOPS + 1)
        value = self.values(rng, 1, names)[0]
        lines = [VT_FIRST.format(name=names[0], value=value)] + [
            VT_NEXT.format(name=b, previous=a) for a, b in zip(names, names[1:])]
        steps = [self.tok.encode(s) for s in lines]
        head, ask = self.bos + self.tok.encode(VT_OPENING), self.tok.encode(VT_ASK.format(value=value))
        fill = room - len(head) - len(ask) - sum(map(len, steps))
        reps = fill // len(self.filler)
        if reps < 1:  # statements share a place where there are fewer repetitions than statements
            raise self.short("vt", length, length - fill + len(self.filler))
        hay, _ = self.haystack("vt", fill)
        cuts = [round(i * reps / len(steps)) * len(self.filler) for i in range(len(steps))]  # even, from the start
        prompt, where, last = list(head), [], 0
        for cut, s in zip(cuts, steps):
            prompt += hay[last:cut]
            where.append((len(prompt), s))
            prompt += s
            last = cut
        return Sample(prompt + hay[last:] + ask, names, where, len(ask))

    def word_list(self, task: str, opening: str, question: str, rng: random.Random, room: int, length: int,
                  counts: list[int], words: list[str]) -> Sample:
        """The prompt of a list of words, each words[i] counts[i] times in a random order, padded with filler to
        `room` tokens; `counts` is asked for with the slots there are (the words that fit at the longest)."""
        head, ask = self.bos + self.tok.encode(opening), self.tok.encode(question)
        tokens = list(head)
        entries = [w for w, c in zip(words, counts) for _ in range(c)]
        rng.shuffle(entries)
        for w in entries:
            tokens += self.pieces[w]
        pad = room - len(ask) - len(tokens)
        assert pad >= 0
        return Sample(tokens + self.haystack(task, pad)[0] + ask, [], [], len(ask))

    def slots(self, opening: str, question: str, room: int, words: list[str], length: int, least: int
              ) -> tuple[int, int]:
        """(how many of `words` a list has room for at their longest, the length that holds `least` of them)."""
        fixed = len(self.bos) + len(self.tok.encode(opening)) + len(self.tok.encode(question))
        longest = max(len(self.pieces[w]) for w in words)
        return max(0, room - fixed) // longest, length - room + fixed + least * longest

    def cwe(self, rng: random.Random, room: int, length: int) -> Sample:
        words = rng.sample(self.words, len(self.words))
        common, rare = words[:CWE_WORDS], words[CWE_WORDS:]
        n, least = self.slots(CWE_OPENING, CWE_ASK, room, words, length, 4 * CWE_WORDS)
        # RULER's 30 and 3 repetitions where they fit; fewer (common twice as often as rare at least) where not
        often = min(CWE_COMMON, n // (2 * CWE_WORDS))
        seldom = max(1, min(CWE_RARE, often // 2))
        if often < 2:
            raise self.short("cwe", length, least)
        count = min(len(rare), (n - often * CWE_WORDS) // seldom)
        s = self.word_list("cwe", CWE_OPENING, CWE_ASK, rng, room, length, [often] * CWE_WORDS + [seldom] * count,
                           common + rare[:count])
        s.expected = common
        return s

    def fwe(self, rng: random.Random, room: int, length: int) -> Sample:
        words = rng.sample(self.words, len(self.words))
        n, least = self.slots(FWE_OPENING, FWE_ASK, room, words, length, 40)
        weights = [1 / (r + 1) ** FWE_ALPHA for r in range(len(words))]
        counts = [int(n * w / sum(weights)) for w in weights]
        if not counts[0] > counts[1] > counts[2] > counts[3] >= 1:
            raise self.short("fwe", length, least)
        s = self.word_list("fwe", FWE_OPENING, FWE_ASK, rng, room, length, counts, words)
        s.expected = words[:FWE_TOP]
        return s


def greedy(model, prompt: list[int], n: int, device, cache: KVCache | None = None) -> list[int]:
    """The n tokens greedy decoding gives after the prompt, through the KV cache, as under every scaling and context
    method eval.passkey decodes; `cache` may hold the prompt's first tokens already."""
    cache = KVCache(model.cfg.n_layers, capacity=len(prompt) + n, rolling=True) if cache is None else cache
    out = [int(read_cached(model, prompt[len(cache):], cache, device)[-1].float().argmax())]
    while len(out) < n:
        out.append(int(read_cached(model, out[-1:], cache, device)[-1].float().argmax()))
    return out


def greedy_trials(model, prompts: list[list[int]], n: int, device) -> Iterator[list[int]]:
    """greedy's answer to each prompt in turn. Where the prompts share SHARED_PREFIX tokens or more (the haystack
    before a needle at depth 0.5 or 1), that prefix is read once, and each prompt continues it and is rewound to it,
    as eval.passkey's trials are: the keys and values of a prefix do not depend on what follows it."""
    shared = min(len(os.path.commonprefix(prompts)), min(map(len, prompts)) - 1) if len(prompts) > 1 else 0
    if shared < SHARED_PREFIX:
        yield from (greedy(model, p, n, device) for p in prompts)
        return
    cache = KVCache(model.cfg.n_layers, capacity=max(map(len, prompts)) + n)  # not rolling: rewound
    read_cached(model, prompts[0][:shared], cache, device)
    for p in prompts:
        yield greedy(model, p, n, device, cache)
        cache.rewind(shared)


def book_tokens(run: Run):
    """The run's validation text (or --data), in the model's own tokens, for niah_single_book."""
    data = TokenData(text_shards(run, progress=False), "val")
    if len(data) == 0:
        data = TokenData(text_shards(run, progress=False), "train")
    return data.tokens[:1_000_000].tolist()


def measure_run(run: Run, methods: list[str], tasks: list[str], lengths: list[int], depths: list[float], seed: int,
                trials: int, device, previous: list[dict], on_row, log: TrialLog,
                context: ContextConfig | None = None) -> None:
    tokenizer = load_tokenizer(run.path)
    book = lru_cache(maxsize=1)(lambda: book_tokens(run))
    gen = Tasks(tokenizer, seed, book)
    for task in tasks:  # refuse a length too short for a prompt before measuring anything
        for n in lengths:
            gen.sample(task, 0, n, depths[0] if task in NIAH else None)
    done = {row_key(r) for r in previous}
    base = {"run": run.name, "seed": run.seed, "position": run.position, "train_length": run.train_length}
    # (the model as loaded, length) -> {(task, depth): a row measured on it}: a scaling at s = 1 is the unscaled model,
    # whose rows it repeats, naming them in same_as
    measured: dict[tuple, dict[tuple, dict]] = {}
    for r in previous:  # the rows measured before (not those repeating another's), each under the model it was
        if (r["run"], r["seed"]) == (run.name, run.seed) and "scores" in r and not r.get("same_as"):
            variants = dict(model_variants(run, methods, r["length"], context))
            if r["scaling"] in variants:
                measured.setdefault((repr(variants[r["scaling"]]), r["length"]), {})[(r["task"], r["depth"])] = r

    def record(model: tuple, row: dict) -> None:  # model: (the model as loaded, length)
        measured.setdefault(model, {})[(row["task"], row["depth"])] = row
        on_row(row)

    identity = ""
    for length in lengths:
        for label, scaling in model_variants(run, methods, length, context):
            todo = [(t, d) for t in tasks for d in (depths if t in NIAH else [None])
                    if row_key({**base, "scaling": label, "task": t, "length": length, "depth": d}) not in done]
            same_model = (repr(scaling), length)
            known = measured.get(same_model, {})
            for task, depth in [x for x in todo if x in known]:
                first = {k: v for k, v in known[(task, depth)].items() if k != "seconds"}
                on_row({**first, "scaling": label, "same_as": first["scaling"]})
            todo = [x for x in todo if x not in known]
            if not todo:
                continue
            model = load_model(run.path, scaling=scaling, device=device, context=context)
            limit = model.position.max_positions
            for task, depth in tqdm(todo, desc=f"{label}, {length:,} tokens", leave=False, disable=None):
                row = {**base, "scaling": label, "task": task, "length": length,
                       "multiple": round(length / run.train_length, 4), "depth": depth}
                if limit is not None and length > limit:
                    record(same_model, {**row, "value": None, "note": f"{run.position} positions stop at {limit - 1}"})
                    continue
                identity = identity or model_identity(model, device)
                key = row_key(row)
                samples = [gen.sample(task, i, length, depth) for i in range(trials)]
                tags = [f"{i}:{'|'.join(s.expected)}" for i, s in enumerate(samples)]  # what fixes the prompts
                before = log.finished(key, tags, identity)
                left = [i for i in range(trials) if i not in before]
                start = time.perf_counter()  # a trial's seconds: from the one before (the first: a shared prefix's)
                for i, generated in zip(left, greedy_trials(model, [samples[i].prompt for i in left], BUDGET[task],
                                                            device)):
                    before[i] = (generated, [])
                    log.add(key, tags, identity, i, before[i], time.perf_counter() - start)
                    start = time.perf_counter()
                answers = [tokenizer.decode(before[i][0]) for i in range(trials)]
                scores = [string_match_all(a, s.expected) for a, s in zip(answers, samples)]
                record(same_model, {**row, "value": round(100 * statistics.fmean(scores), 2), "trials": trials,
                                    "scores": [round(x, 4) for x in scores],
                                    "found": sum(round(x * len(s.expected)) for x, s in zip(scores, samples)),
                                    "expected": sum(len(s.expected) for s in samples), "budget": BUDGET[task],
                                    "answer": answers[0], "seconds": round(log.seconds(key, tags, identity), 2),
                                    "context": context_settings(model, context), "model": identity})


def main(argv: list[str] | None = None) -> list[dict]:
    parser = evaluator_parser(__doc__, "run directories, or hf:PATH (a transformers checkpoint)", "runs/eval/ruler",
                              f"keep the rows already in --out/{RESULTS} and measure only the missing ones")
    parser.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated (default all: {', '.join(TASKS)})")
    parser.add_argument("--multiples", default=DEFAULT_MULTIPLES,
                        help=f"prompt lengths as multiples of each model's L (default {DEFAULT_MULTIPLES})")
    parser.add_argument("--lengths", default=None, help="prompt lengths in tokens, instead of --multiples")
    parser.add_argument("--depths", default=DEFAULT_DEPTHS,
                        help=f"where the niah needles sit, shares of the haystack in [0, 1] (default {DEFAULT_DEPTHS})")
    parser.add_argument("--trials", type=int, default=DEFAULT_TRIALS,
                        help=f"prompts per task, length and depth (default {DEFAULT_TRIALS})")
    parser.add_argument("--scaling", default=None,
                        help="RoPE scalings for unscaled rope models: a static one at s = max(1, length / L), a dynamic "
                             "one following the length as it decodes (default none)")
    parser.add_argument("--context-method", default="none", help=CONTEXT_HELP)
    parser.add_argument("--data", default=None, help=DATA_HELP + "; the book haystack of niah_single_book")
    parser.add_argument("--seed", type=int, default=0, help="seed of the prompts (the same for every model)")
    args = parser.parse_args(argv)

    def work(rows: list[dict], lock) -> None:
        tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
        unknown = [t for t in tasks if t not in BUDGET]
        if unknown or not tasks:
            raise UserError(f"--tasks: unknown {', '.join(map(repr, unknown)) or repr(args.tasks)}; choose from "
                            f"{', '.join(TASKS)}")
        check_data_option(args.data)
        context = parse_checked(args.context_method, "--context-method")
        methods = parse_scalings(scalings_option(args.scaling, context, "none"))
        depths = parse_depths(args.depths, "the haystack")
        if args.trials < 1:
            raise UserError(f"--trials must be >= 1, got {args.trials}")
        lock()
        runs = read_runs(args.runs, data=args.data)  # a task-track run is refused here
        check_applicable(runs, methods, context)
        if args.resume:
            rows.extend(previous_rows(args.out / RESULTS, "eval.ruler", "task"))
        previous = list(rows)
        device = pick_device(args.device, "--device")
        log = TrialLog(args.out / TRIALS, args.resume)

        def measured(row):
            rows.append(row)
            write_report(rows, args.out, tables=False)
        for run in tqdm(runs, unit="run", dynamic_ncols=True, disable=None):
            measure_run(run, methods, tasks, run_lengths(run, args.lengths, args.multiples), depths, args.seed, args.trials, device, previous, measured, log,
                        context)
        log.close({row_key(r) for r in rows})

    rows = evaluate(args.out, "eval.ruler", work, lambda rows: write_report(rows, args.out))
    print(markdown(rows))
    print(f"wrote {args.out}/{RESULTS}, results.md")
    return rows


if __name__ == "__main__":
    main()
