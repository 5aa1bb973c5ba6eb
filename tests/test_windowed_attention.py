"""A sliding window on scores without a bias (RoPE, NoPE) at O(T x W): attention in blocks of queries, each reading only
the keys inside its window, gives what SDPA gives with the whole (T, S) boolean mask, alone and in the model (a cache,
chunked prefill, decoding, per-sequence positions, GQA, gradients); the encodings with a bias keep their mask."""
import pytest
import torch
import torch.nn.functional as F

from config import ModelConfig, PositionConfig
from model.attention import KVCache, window_blocks, windowed_attention
from model.gpt import GPT
from model.positions import PositionContext


def masked(q, k, v, q_pos, k_pos, window):
    """SDPA over every key, the window and the future hidden by a (T, S) boolean mask written out here."""
    distance = q_pos[..., :, None] - k_pos[..., None, :]
    mask = (distance >= 0) & (distance < window)
    mask = mask if mask.dim() == 2 else mask[:, None]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=k.shape[1] != q.shape[1])


def windowed(q, k, v, q_pos, k_pos, window, consecutive=None):
    ctx = PositionContext(q_pos, k_pos, window=window,
                          window_blocks=window_blocks(q_pos, k_pos, window, consecutive))
    return windowed_attention(q, k, v, ctx, q.shape[-1] ** -0.5, k.shape[1] != q.shape[1]), ctx.window_blocks


def qkv(B, H, nkv, T, S, hs=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, T, hs, generator=g), torch.randn(B, nkv, S, hs, generator=g),
            torch.randn(B, nkv, S, hs, generator=g))


@pytest.mark.parametrize("T, window", [(40, 64), (64, 64), (1500, 64), (300, 1), (700, 200)])
@pytest.mark.parametrize("consecutive", [True, None])  # by index, or found in the positions
def test_windowed_attention_is_the_masked_one_without_a_cache(T, window, consecutive):
    q, k, v = qkv(2, 4, 2, T, T)  # batch 2, GQA: 4 query heads on 2 key heads
    pos = torch.arange(T)
    got, blocks = windowed(q, k, v, pos, pos, window, consecutive)
    torch.testing.assert_close(got, masked(q, k, v, pos, pos, window), rtol=1e-5, atol=1e-5)
    rows = blocks[0][1] - blocks[0][0]
    assert [b[:2] for b in blocks] == [(a, min(a + rows, T)) for a in range(0, T, rows)]
    # each block reads its queries' keys and no more: from its first query's position - W + 1 to its last
    assert all((start, end) == (max(0, a - window + 1), b) for a, b, start, end in blocks)
    if consecutive is None:
        assert blocks == windowed(q, k, v, pos, pos, window, True)[1]  # found in k_pos as by index


def test_a_long_input_scores_only_the_pairs_near_its_window():
    T, window = 4096, 128
    q, k, v = qkv(1, 2, 2, T, T, hs=8)
    pos = torch.arange(T)
    got, blocks = windowed(q, k, v, pos, pos, window, True)
    torch.testing.assert_close(got, masked(q, k, v, pos, pos, window), rtol=1e-5, atol=1e-5)
    scored = sum((b - a) * (end - start) for a, b, start, end in blocks)
    assert scored <= T * (1.5 * window)  # against T x T = 32 x window per query for the full mask


@pytest.mark.parametrize("T", [1, 5, 600])  # decoding one token, a chunk, a long chunk after the cache
@pytest.mark.parametrize("window", [1, 16, 100])
def test_windowed_attention_after_a_cache_is_the_masked_one(T, window):
    cached = 250
    S = cached + T
    q, k, v = qkv(3, 4, 1, T, S, seed=T)
    k_pos = torch.arange(S)
    q_pos = k_pos[cached:]
    got, blocks = windowed(q, k, v, q_pos, k_pos, window)
    torch.testing.assert_close(got, masked(q, k, v, q_pos, k_pos, window), rtol=1e-5, atol=1e-5)
    if T == 1:  # a decoding step reads the last W keys, a slice of the cache
        assert blocks == [(0, 1, S - window, S)]


def test_windowed_attention_with_per_sequence_and_trimmed_positions():
    # (B, S) positions: each sequence its own, with gaps (train.positions); a trimmed cache's keys start past 0
    g = torch.Generator().manual_seed(3)
    T, window = 300, 24
    pos = torch.stack([torch.randperm(900, generator=g)[:T].sort().values for _ in range(2)])  # (2, T)
    q, k, v = qkv(2, 4, 2, T, T, seed=4)
    got, _ = windowed(q, k, v, pos, pos, window)
    torch.testing.assert_close(got, masked(q, k, v, pos, pos, window), rtol=1e-5, atol=1e-5)
    k_pos = torch.arange(1000, 1200)  # the last 200 tokens of 1200, the last 40 of them the queries
    q, k, v = qkv(1, 2, 2, 40, 200, seed=5)
    got, blocks = windowed(q, k, v, k_pos[-40:], k_pos, window)
    torch.testing.assert_close(got, masked(q, k, v, k_pos[-40:], k_pos, window), rtol=1e-5, atol=1e-5)
    assert blocks == [(0, 40, 160 - window + 1, 200)]


def tiny(position="rope", window=8, **kw):
    cfg = ModelConfig(vocab_size=97, d_model=32, n_heads=4, n_kv_heads=2, n_layers=2, max_seq_len=64,
                      sliding_window=window, position=PositionConfig(type=position), **kw)
    cfg.validate()
    torch.manual_seed(0)
    return GPT(cfg).eval()


def by_mask(model, *args, **kw):
    """The model's output with its window as -inf in a (T, S) mask, the path every encoding took before."""
    model.window_mask = True
    try:
        return model(*args, **kw)
    finally:
        model.window_mask = False


@pytest.mark.parametrize("position", ["rope", "nope"])
@torch.no_grad()
def test_the_model_over_a_window_is_the_masked_model(position):
    model = tiny(position, window=8)
    idx = torch.randint(0, 97, (2, 700), generator=torch.Generator().manual_seed(1))
    want = by_mask(model, idx)[0]
    torch.testing.assert_close(model(idx)[0], want, rtol=1e-5, atol=1e-5)
    # chunked prefill after a cache, then decoding one token at a time
    cache = KVCache(model.cfg.n_layers)
    parts = [model(idx[:, :100], cache=cache)[0], model(idx[:, 100:650], cache=cache)[0]]
    parts += [model(idx[:, i:i + 1], cache=cache)[0] for i in range(650, 700)]
    torch.testing.assert_close(torch.cat(parts, dim=1), want, rtol=1e-5, atol=1e-5)
    # per-sequence positions (train.positions)
    positions = torch.stack([torch.arange(0, 1400, 2), torch.arange(5, 705)])
    torch.testing.assert_close(model(idx, positions=positions)[0], by_mask(model, idx, positions=positions)[0],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("position", ["rope", "alibi", "fox"])  # the window on scores, in a bias, in fox's gates
@torch.no_grad()
def test_a_rolling_cache_keeps_only_what_the_window_reaches_and_decodes_the_same(position):
    model = tiny(position, window=8)
    idx = torch.randint(0, 97, (1, 300), generator=torch.Generator().manual_seed(4))
    want = model(idx)[0]
    cache = KVCache(model.cfg.n_layers, rolling=True)
    parts, held = [model(idx[:, :200], cache=cache)[0]], []  # a prefill far past the window
    for i in range(200, 300):
        parts.append(model(idx[:, i:i + 1], cache=cache)[0])
        held.append(len(cache.windowed[8]))
    torch.testing.assert_close(torch.cat(parts, dim=1), want, rtol=1e-5, atol=1e-5)
    (own,) = cache.windowed.values()  # every layer has the window: the cache given holds positions only
    assert len(cache) == 300 and all(k is None for k in cache.keys) and all(k is not None for k in own.keys)
    assert held[0] == 8 and max(held) == 16 and own.keys[0].shape[-2] <= 32  # the prefill's buffers shrunk
    with pytest.raises(ValueError, match="rolling=False"):
        cache.rewind(100)
    with pytest.raises(ValueError, match="rolling=False"):
        cache.make_static()


@torch.no_grad()
def test_a_rolling_cache_trims_and_rewinds_as_the_whole_cache_does():
    model = tiny("rope", window=8)
    idx = torch.randint(0, 97, (1, 60), generator=torch.Generator().manual_seed(5))
    outs = []
    for rolling in (False, True):
        cache, out = KVCache(model.cfg.n_layers, rolling=rolling), []
        out.append(model(idx[:, :12], cache=cache)[0])
        cache.rewind(6)  # before the window's cache rolled, both go back
        out.append(model(idx[:, 6:12], cache=cache)[0])
        for i in range(12, 60):  # a sliding window of 5 tokens after 2 sinks, shorter than the layers' window
            cache.trim(5, first=2)
            out.append(model(idx[:, i:i + 1], cache=cache)[0])
        outs.append(torch.cat(out, dim=1))
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-5)


def test_the_windowed_model_has_the_masked_models_gradients():
    model = tiny("rope", window=5).train()
    idx, targets = torch.randint(0, 97, (2, 2, 90), generator=torch.Generator().manual_seed(2))
    grads = []
    for mask in (False, True):
        model.zero_grad()
        model.window_mask = mask
        model(idx, targets)[1].backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for windowed_grad, masked_grad in zip(*grads):
        torch.testing.assert_close(windowed_grad, masked_grad, rtol=1e-5, atol=1e-6)


def test_only_scores_without_a_bias_read_the_window_themselves():
    T = 20
    pos = torch.arange(T)
    for position, windowed_ in [("rope", True), ("nope", True), ("alibi", False), ("t5", False)]:
        model = tiny(position, window=6)
        ctx = model.shared_context(model.position, pos, pos, T, True, None, 6, False)
        assert (ctx.window == 6 and ctx.bias is None) if windowed_ else (ctx.window is None and ctx.bias is not None)
    model = tiny("rope", window=6)  # a window as long as the input hides nothing: plain causal attention
    ctx = model.shared_context(model.position, pos[:6], pos[:6], 6, True, None, 6, False)
    assert ctx.window is None and ctx.bias is None


@torch.no_grad()
def test_flex_attention_takes_a_window_by_its_block_mask():
    # with FlexAttention on (CUDA; the CPU runs it for tests) a window by index is its block mask, no (T, S) table
    model = tiny("rope", window=8)
    idx = torch.randint(0, 97, (1, 256), generator=torch.Generator().manual_seed(3))
    want = by_mask(model, idx)[0]
    model.use_flex_attention(True)
    pos = torch.arange(256)
    ctx = model.shared_context(model.position, pos, pos, 256, True, None, 8, False)
    assert ctx.block_mask is not None and ctx.score_mod is None and ctx.bias is None
    torch.testing.assert_close(model(idx)[0], want, rtol=1e-5, atol=1e-5)


def test_the_benchmark_times_the_windowed_forward_against_the_mask_and_gemma3(tmp_path):
    pytest.importorskip("transformers")
    import json
    from pathlib import Path

    from speed import bench
    bench.main(["--config", str(Path(__file__).resolve().parents[1] / "configs/tiny.yaml"), "--positions", "",
                "--sliding-window", "16", "--sliding-window-length", "128", "--repeats", "1", "--out", str(tmp_path),
                "model.d_model=32", "model.n_layers=2", "run.device=cpu"])
    case = json.loads((tmp_path / "bench.json").read_text())["sliding_window"]
    assert (case["length"], case["window"]) == (128, 16)
    assert [r["name"] for r in case["rows"]] == ["ours, keys inside the window", "ours, (T, S) mask",
                                                "transformers Gemma3 (sdpa)"]
    assert all(r["tokens_per_s"] > 0 and r["peak_mib"] > 0 for r in case["rows"])
    assert "Sliding-window forward of random (batch 1, 128 tokens, a window of 16 tokens on every layer" in (
        tmp_path / "bench.md").read_text()
    bench.main(["--config", str(Path(__file__).resolve().parents[1] / "configs/tiny.yaml"), "--positions", "",
                "--sliding-window", "16", "--sliding-window-length", "128", "--repeats", "1", "--out", str(tmp_path),
                "--sliding-window-cases", "ours,peer", "model.d_model=32", "model.n_layers=2", "run.device=cpu"])
    case = json.loads((tmp_path / "bench.json").read_text())["sliding_window"]  # without the mask (32k: 24 GB)
    assert [r["name"] for r in case["rows"]] == ["ours, keys inside the window", "transformers Gemma3 (sdpa)"]
    assert set(case["max_logit_difference"]) == {"peer"}
