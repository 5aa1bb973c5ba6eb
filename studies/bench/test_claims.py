"""The bench page's claims (and the front page's bench.*) from the committed rows; altered rows break them last."""
from studies.bench.values import (AIM_BIASES, AIM_DECODE, AIM_DECODE_PEER, AIM_MFU, BIASES, CPU, H200, LEVEL, LONG,
                                  PEERS, REST, A, G, aim_left, decode_ratio, decoded, load, ms, readings, rounds, row,
                                  share, spread)

HOLD = 0.003  # "holds its tokens/s after evaluating": each reading after an evaluation within 0.3% of the first

def level(r):  # (mean, low, high) of the round ratios
    return r[1] <= 1 <= r[2] and 1 - LEVEL <= r[1] and r[2] <= 1 + LEVEL

def holds(p):
    return all(abs(r / readings(p)[0] - 1) <= HOLD for r in readings(p)) and not any(
        e["graphs"] or e["device_allocs"] for e in p["evaluations"])

def biases_short(d, other):  # short of the aim by more than RoPE's two runs (d and other) differ
    rope = [row(d)["train_tokens_per_s"], row(other)["train_tokens_per_s"]]
    return max(share(d, p) for p in BIASES) * (1 + spread(rope)) < AIM_BIASES

def falls_behind(d):  # at LONG x L each learned bias below RoPE, and further below than at 1x L
    return all(share(d, p, LONG) < min(1, share(d, p, 1)) for p in BIASES)

def test_claim_cpu_level(): assert all(level(rounds(load(PEERS[p]))) for p in ("gpt2", "transformers"))
def test_claim_cpu_below_nanogpt(): assert rounds(load(PEERS["nanogpt"]))[2] < 1
def test_claim_mfu_below_aim(): assert load(G)["mfu"] < AIM_MFU
def test_claim_gpu_beats_llama(): assert all(rounds(load(PEERS[p]))[1] > 1 for p in ("h100", "h200"))
def test_claim_biases_below_aim(): assert biases_short(load(H200), load(PEERS["h200"]))
def test_claim_biases_slower_at_16x(): assert falls_behind(load(CPU))
def test_claim_alibi_below_rope(): assert max(readings(load(A))) < min(readings(load(G)))  # every ALiBi reading below
def test_claim_training_holds_after_evaluation(): assert holds(load(G))
def test_claim_products_leave_too_little(): assert aim_left(load(G)) < sum(ms(load(G))[k] for k in REST)

def test_claim_decoding_meets_aim():  # the static cache's decoding, where the grown cache's fell short
    assert min(decoded(load("gpu/decode/bench.json"))) >= AIM_DECODE > max(decoded(load("gpu/bench.json")))

def test_claim_h200_decoding_beats_aim(): assert decode_ratio(load(PEERS["h200"])) >= AIM_DECODE_PEER
def test_claim_biases_decode_level():  # the H200's four readings, RoPE's and the learned biases'
    assert spread([t for p in ("rope", *BIASES) for t in decoded(load(H200), p)]) < LEVEL

def test_slower_rounds_break_level_and_a_faster_nanogpt_breaks_below():
    gpt2, nanogpt = load(PEERS["gpt2"]), load(PEERS["nanogpt"])
    gpt2["peer"]["round_ratios"] = [r - LEVEL for r in gpt2["peer"]["round_ratios"]]
    nanogpt["peer"]["round_ratios"] = [r + LEVEL for r in nanogpt["peer"]["round_ratios"]]
    assert not level(rounds(gpt2)) and rounds(nanogpt)[2] >= 1

def test_faster_learned_biases_break_their_claims():
    h200, cpu = load(H200), load(CPU)
    row(h200, "t5")["train_tokens_per_s"] = AIM_BIASES * row(h200)["train_tokens_per_s"]
    row(cpu, "kerple")["eval"] = [{**e, "tokens_per_s": 2 * e["tokens_per_s"]} for e in row(cpu, "kerple")["eval"]]
    assert not biases_short(h200, load(PEERS["h200"])) and not falls_behind(cpu)

def test_a_slow_reading_after_an_evaluation_breaks_the_hold():
    profile = load(G)
    profile["evaluations"][-1]["tokens_per_s"] *= 1 - 2 * HOLD
    assert not holds(profile)
