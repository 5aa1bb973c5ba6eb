"""Context-use probes: does a model use the tokens D positions back, inside and past its training length?

    python -m eval.probe runs/study/seed1/rope runs/study/seed1/alibi [--multiples 0.25,0.5,1,2,4,8,16] \
        [--scaling none,linear,ntk,yarn] [--samples 16] [--passkey-samples 8] [--passkey-multiples 1,2,4,8,16] \
        [--passkey-depths 0.1,0.5,0.9] [--data SOURCE] [--out runs/eval/probe]

Perplexity alone cannot say this: a model that only looks 30 tokens back is flat past any L.

copy     A span of `--span` held-out tokens, then held-out text, then the span again, its second copy
         starting D tokens after the first (D = multiple x L). `value` is the mean loss on the second
         copy (its first token excluded: nothing predicts it); `baseline` the loss on the same tokens at
         the same position when the first copy is replaced by other text, all else equal. gain =
         baseline - value > 0 means the model looked back D tokens and copied (induction copying,
         Olsson et al. 2022, arXiv 2209.11895).
passkey  The PI / YaRN papers' task (the passkey retrieval of Chen et al. 2306.15595, section 3, and
         of Peng et al. 2309.00071, section 4): a key stated once at a depth of held-out filler text of the
         given length, asked for at the end. The key is a word the tokenizer holds as one token (key_words;
         digits would be rare byte-fallback tokens). `value` is the share of keys ranked first among the
         candidate words by the model's prediction of the answer; `rank` the mean rank of the true key
         (chance: (candidates + 1) / 2), so partial retrieval shows where accuracy is zero.

Every run sees the same samples (a fixed generator), so encodings are compared on the same text.
Runs and scalings are chosen as in eval.extrapolation: rope runs without scaling get each static
method of --scaling with s = max(1, length / L); a fine-tuned run uses its own scaling; `learned`
past its table is a row with value null. --context-method applies a training-free context method to every
probe, as in eval.extrapolation (--scaling then defaults to none). A model is a run directory or hf:PATH
(eval.extrapolation's --data rule). A measurement identical to one made (a static scaling at
s = 1 is plain RoPE) is not made again: its row repeats the numbers and names the row it shares them with
(same_as); `seconds` is the time the measurement took. --multiples '' leaves the copy probe out. Writes
probes.json, probes.md and probes.png.
"""
from __future__ import annotations

import statistics
import time

import torch
from tqdm import tqdm

from checkpoint import FromRun, load_model, load_tokenizer
from config import ContextConfig, ScalingConfig, UserError
from data import TokenData, Tokenizer
from device import autocast, pick_device
from eval.harness import (CONTEXT_HELP, DATA_HELP, TOKENS_PER_FORWARD, Run, check_applicable, check_data_option,
                          context_settings, evaluate, evaluator_parser, parse_multiples, plan, read_runs,
                          static_scalings, text_shards)
from model.context import parse_checked
from eval.results.probe import markdown, row_key, write_report
from eval.results.rows import previous_rows

DEFAULT_MULTIPLES = "0.25,0.5,1,2,4,8,16"
PASSKEY_MULTIPLES = (1, 2, 4, 8, 16)
PASSKEY_DEPTHS = (0.1, 0.5, 0.9)


def model_variants(run: Run, methods: list[str], length: int, context: ContextConfig | None = None
                   ) -> list[tuple[str, ScalingConfig | FromRun | None]]:
    """(scaling label, what load_model gets) for a run probed at `length` tokens: eval.extrapolation's
    plan with s = length / L for a static method and s following the length for a dynamic one (decoded by
    eval.harness.read_cached), the context method named in the label. Within L both are the unscaled model, which
    comes first, so that it is the one said to be repeated."""
    ordered = sorted(methods, key=lambda m: m != "none")
    return [(m.label, m.scaling) for m in plan(run, ordered, [length], [], context)]


class NoPasskey(ValueError):
    """A passkey prompt that cannot be built: a length shorter than the fact and the question, or a
    tokenizer that holds fewer than two candidate key words as single tokens."""


def batches(sequences: torch.Tensor, device):
    """Batches of token sequences (N, T) on `device` that bound memory."""
    batch = max(1, TOKENS_PER_FORWARD // sequences.shape[1])
    return (sequences[i:i + batch].to(device) for i in range(0, len(sequences), batch))


def forward_in_batches(model, sequences: torch.Tensor, device, last_only: bool = False):
    """Yield (x, logits) over batches of token sequences (N, T); logits predict x[:, 1:] (with `last_only`, only the
    last of them)."""
    for x in batches(sequences, device):
        with torch.inference_mode(), autocast(device):
            logits, _ = model(x[:, :-1], last_only=last_only)  # (B, T-1 or 1, V)
        yield x, logits


def losses(model, sequences: torch.Tensor, device) -> torch.Tensor:
    """Next-token losses (N, T-1) of token sequences (N, T), from model.token_losses (no (B, T, V) logits)."""
    out = []
    for x in batches(sequences, device):
        with torch.inference_mode(), autocast(device):
            out.append(model.token_losses(x[:, :-1], x[:, 1:]).cpu())
    return torch.cat(out)


def key_ranks(model, sequences: torch.Tensor, keys: list[int], candidates: list[int], device) -> list[float]:
    """The rank (1 = first) of the true key among the candidate key tokens in the model's prediction of the
    last token of each sequence: partial retrieval shows as a rank below the chance mean. Ties share
    their mean rank, so a model that scores every candidate alike is at chance, (candidates + 1) / 2,
    and only a key scored strictly above the others is rank 1."""
    ranks = []
    for x, logits in forward_in_batches(model, sequences, device, last_only=True):
        scores = logits[:, -1, candidates].float().cpu()  # (B, candidates)
        for row in scores:
            k = keys[len(ranks)]
            above, tied = int((row > row[k]).sum()), int((row == row[k]).sum()) - 1
            ranks.append(1 + above + tied / 2)
    return ranks


def text_inside_a_document(data: TokenData, length: int, g: torch.Generator) -> torch.Tensor:
    """`length` consecutive held-out tokens from one document, at a random place."""
    docs = [(a, b) for a, b in zip(data.doc_offsets[:-1].tolist(), data.doc_offsets[1:].tolist()) if b - a > length]
    if not docs:
        raise UserError(f"no {data.split} document is longer than {length} tokens")
    a, b = docs[int(torch.randint(len(docs), (1,), generator=g))]
    start = a + int(torch.randint(b - a - length, (1,), generator=g))
    return data.window_tensor(start, start + length)


def copy_samples(data: TokenData, distance: int, span: int, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(repeat, control), each (n, distance + span): held-out text whose last `span` tokens repeat its
    first `span` (repeat), or the same text with the first span replaced by other text (control)."""
    g = torch.Generator().manual_seed(seed * 7919 + distance)
    repeat, control = [], []
    for _ in range(n):
        text = text_inside_a_document(data, distance + 2 * span, g)
        repeated = text[:distance + span].clone()
        repeated[distance:] = text[:span]
        controlled = repeated.clone()
        controlled[:span] = text[distance + span:]  # text of the same document that is not the span
        repeat.append(repeated)
        control.append(controlled)
    return torch.stack(repeat), torch.stack(control)


N_KEY_WORDS = 32


def key_words(tokenizer: Tokenizer, n: int = N_KEY_WORDS) -> list[tuple[str, int]]:
    """(word, token id) of the candidate keys: the first `n` whole lowercase words of four letters or more
    in the tokenizer's vocabulary (BPE ids follow merge order, so these are frequent words), each one
    token with its leading space."""
    out = []
    for i in range(tokenizer.vocab_size):
        piece = tokenizer.piece(i)  # its text, the space before a word included
        word = piece[1:]
        if piece.startswith(" ") and len(word) >= 4 and word.isalpha() and word.islower() \
                and tokenizer.encode(f" {word}") == [i]:
            out.append((word, i))
            if len(out) == n:
                break
    return out


def passkey_samples(tokenizer: Tokenizer, candidates: list[tuple[str, int]], data: TokenData, length: int,
                    depth: float, n: int, seed: int) -> tuple[torch.Tensor, list[int]]:
    """(n, length) sequences: filler text with a key word stated at `depth`, ending in the question and
    the key; and the index of the key in the candidate list for each."""
    g = torch.Generator().manual_seed(seed * 104729 + length * 10 + int(depth * 10))
    if len(candidates) < 2:
        raise NoPasskey(f"the tokenizer holds {len(candidates)} of the candidate key words as one token")
    out, keys = [], []
    for _ in range(n):
        k = int(torch.randint(len(candidates), (1,), generator=g))
        word, token = candidates[k]
        fact = tokenizer.encode(f" The pass key is {word}. Remember it. {word} is the pass key.")
        question = tokenizer.encode(" What is the pass key? The pass key is")
        filler_len = length - len(fact) - len(question) - 1
        if filler_len < 1:
            raise NoPasskey(f"the passkey prompt does not fit in {length} tokens")
        filler = text_inside_a_document(data, filler_len, g).tolist()
        at = int(depth * filler_len)
        out.append(torch.tensor(filler[:at] + fact + filler[at:] + question + [token]))
        keys.append(k)
    return torch.stack(out), keys


def probe_run(run: Run, methods: list[str], multiples: list[float], span: int, n_copy: int, n_passkey: int,
              seed: int, device, passkey_multiples=PASSKEY_MULTIPLES, passkey_depths=PASSKEY_DEPTHS,
              done: frozenset | set = frozenset(), on_row=None, context: ContextConfig | None = None) -> list[dict]:
    """The rows of one run's probes (with the context method), but those whose row_key is in `done`;
    `on_row(row)` as each is made."""
    data = TokenData(text_shards(run, progress=False), "test")
    tokenizer = load_tokenizer(run.path)
    candidates = key_words(tokenizer)  # once per run: it scans the vocabulary
    base = {"run": run.name, "seed": run.seed, "position": run.position, "train_length": run.train_length}
    jobs = [("copy", max(span + 1, round(m * run.train_length)), None) for m in multiples]
    jobs += [("passkey", round(m * run.train_length), d) for m in passkey_multiples for d in passkey_depths]
    rows, models = [], {}

    def add(row):
        rows.append(row)
        if on_row:
            on_row(row)
    measured: dict[tuple, tuple[str, dict]] = {}  # (model, probe, size, depth) -> (label, numbers)
    for probe, size, depth in jobs:
        length = size + span if probe == "copy" else size
        for label, scaling in model_variants(run, methods, length, context):
            row = {**base, "scaling": label, "probe": probe, "distance" if probe == "copy" else "length": size,
                   "multiple": round(size / run.train_length, 4), "value": None}
            if depth is not None:
                row["depth"] = depth
            if row_key(row) in done:
                continue
            key = repr(scaling)
            if key not in models:
                models.clear()  # one model in memory at a time
                models[key] = load_model(run.path, scaling=scaling, device=device, context=context)
            model = models[key]
            row["context"] = context_settings(model, context)
            limit = model.position.max_positions
            if limit is not None and length > limit:
                add({**row, "note": f"{run.position} positions stop at {limit - 1}"})
                continue
            cell = (key, probe, size, depth)
            if cell in measured:  # the same model on the same samples: the same numbers
                label_of, numbers = measured[cell]
                add({**row, **numbers, "same_as": label_of})
                continue
            t0 = time.perf_counter()
            if probe == "copy":
                repeat, control = copy_samples(data, size, span, n_copy, seed)
                scored = slice(size, size + span - 1)  # targets: the second copy's tokens after its first
                value = float(losses(model, repeat, device)[:, scored].mean())
                baseline = float(losses(model, control, device)[:, scored].mean())
                numbers = {"value": round(value, 5), "baseline": round(baseline, 5),
                           "gain": round(baseline - value, 5), "samples": n_copy}
            else:
                try:
                    sequences, keys = passkey_samples(tokenizer, candidates, data, size, depth, n_passkey, seed)
                except NoPasskey as e:
                    add({**row, "note": str(e)})
                    continue
                ranks = key_ranks(model, sequences, keys, [t for _, t in candidates], device)
                numbers = {"value": round(sum(r == 1 for r in ranks) / len(ranks), 4),
                           "rank": round(statistics.fmean(ranks), 3), "candidates": len(candidates),
                           "samples": n_passkey}
            numbers["seconds"] = round(time.perf_counter() - t0, 2)
            measured[cell] = (label, numbers)
            add({**row, **numbers})
    return rows


# ----------------------------------------------------------------------------- report


def main(argv: list[str] | None = None) -> list[dict]:
    parser = evaluator_parser(__doc__, "run directories, or hf:PATH (a transformers checkpoint)", "runs/eval/probe",
                              "keep the rows already in --out/probes.json and measure only the missing ones (the same "
                              "options); rows are written as they are measured")
    parser.add_argument("--multiples", default=DEFAULT_MULTIPLES,
                        help=f"copy distances as multiples of each run's L (default {DEFAULT_MULTIPLES}; '' for no "
                             f"copy probe)")
    parser.add_argument("--passkey-multiples", default=",".join(map(str, PASSKEY_MULTIPLES)),
                        help="passkey lengths as multiples of each run's L (default %(default)s)")
    parser.add_argument("--passkey-depths", default=",".join(map(str, PASSKEY_DEPTHS)),
                        help="where the key is stated, as shares of the filler (default %(default)s)")
    parser.add_argument("--data", default=None, help=DATA_HELP)
    parser.add_argument("--scaling", default=None,
                        help="static RoPE scalings for unscaled rope runs, s = length / L "
                             "(default none,linear,ntk,yarn; none with --context-method)")
    parser.add_argument("--context-method", default="none", help=CONTEXT_HELP)
    parser.add_argument("--span", type=int, default=32, help="tokens in the repeated span (default 32)")
    parser.add_argument("--samples", type=int, default=16, help="copy samples per distance (default 16)")
    parser.add_argument("--passkey-samples", type=int, default=8, help="passkey keys per length and depth (default 8)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the samples (the same for every run)")
    args = parser.parse_args(argv)

    def work(rows: list[dict], lock) -> None:
        context = parse_checked(args.context_method, "--context-method")
        multiples = parse_multiples(args.multiples) if args.multiples.strip() else []
        methods = static_scalings(args.scaling, context, "none,linear,ntk,yarn", "eval.probe")
        passkey_multiples = parse_multiples(args.passkey_multiples, "--passkey-multiples")
        depths = parse_multiples(args.passkey_depths, "--passkey-depths")
        if depths[-1] > 1:
            raise UserError(f"--passkey-depths must be shares of the filler in (0, 1], got {args.passkey_depths!r}")
        check_data_option(args.data)
        for option, value in (("--span", args.span), ("--samples", args.samples),
                              ("--passkey-samples", args.passkey_samples)):
            if value < 2:
                raise UserError(f"{option} must be >= 2, got {value}")
        lock()
        runs = read_runs(args.runs, data=args.data)
        check_applicable(runs, methods, context)
        if args.resume:
            previous = previous_rows(args.out / "probes.json", "eval.probe", "probe")
            if any(r["probe"] == "passkey" and r["value"] is not None and "rank" not in r for r in previous):
                raise UserError(f"--resume: {args.out / 'probes.json'} comes from an older eval.probe (passkey rows "
                                "without rank); probe again without --resume")
            rows.extend(previous)
        done = {row_key(r) for r in rows}  # the label names the context method: another one's rows are not done
        device = pick_device(args.device, "--device")

        def measured(row):  # written at once: a killed evaluation keeps it
            rows.append(row)
            write_report(rows, args.out, tables=False)
        for run in tqdm(runs, unit="run", dynamic_ncols=True, disable=None):  # off when not a terminal
            start = len(rows)
            rows[start:] = probe_run(run, methods, multiples, args.span, args.samples, args.passkey_samples,
                                     args.seed, device, passkey_multiples, depths, done, measured, context)
            write_report(rows, args.out, tables=False)

    rows = evaluate(args.out, "eval.probe", work, lambda rows: write_report(rows, args.out))
    print(markdown(rows))
    print(f"wrote {args.out}/probes.json, probes.md, probes.png")
    return rows


if __name__ == "__main__":
    main()
