"""The GPU paths against the reference paths, on CUDA (skipped, with the reason, on a machine without it;
`make gpu-tests-bench` runs them on one): FlexAttention against ALiBi folded into q and k and against the
learned biases' float mask, cached decoding
against a full forward pass, torch.compile against eager, bf16 autocast against float32, fused
AdamW against the loop implementation. The CPU versions of the first two are in tests/test_model.py."""
import pytest
import torch

from config import ModelConfig, PositionConfig
from device import autocast
from model.attention import KVCache
from model.gpt import GPT

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device: the GPU path tests run on a CUDA machine (make gpu-tests-bench)")
CUDA = torch.device("cuda")
ENCODINGS = ["learned", "sinusoidal", "rope", "alibi", "nope", "t5", "kerple", "fire", "fox"]
RNOPE_SWA = {"layer_pattern": "rope,nope", "sliding_window": 8}  # a RoPE layer over a window, then a NoPE layer


def model_on_cuda(position="rope", scaling=None, max_seq_len=64, flex=False, layer_pattern=None, **kw):
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=97, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=max_seq_len,
                      position=PositionConfig(type=position, scaling=scaling, layer_pattern=layer_pattern), **kw)
    model = GPT(cfg).to(CUDA)
    model.use_flex_attention(flex)
    return model


def batch(T=64, B=2):
    torch.manual_seed(1)
    return torch.randint(0, 97, (2, B, T), device=CUDA)


def grads(model):
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("position, layers", [(p, {}) for p in ("alibi", "t5", "kerple", "fire", "fox")]
                         + [("rope", RNOPE_SWA)])
def test_flex_attention_equals_the_sdpa_path_forward_and_backward(position, layers):
    # ALiBi: against its bias folded into q and k; the learned biases and FoX's gate: against their float mask; a
    # sliding window: against its -inf mask
    x, y = batch()
    results = []
    for flex in (False, True):
        model = model_on_cuda(position, flex=flex, **layers)
        logits, loss = model(x, y)
        loss.backward()
        results.append((logits.detach(), grads(model)))
    (want, want_grads), (got, got_grads) = results
    torch.testing.assert_close(got, want, atol=2e-4, rtol=2e-4)
    for name in want_grads:
        torch.testing.assert_close(got_grads[name], want_grads[name], atol=2e-4, rtol=2e-3)


@pytest.mark.parametrize("position, scaling, layers", [(p, None, {}) for p in ENCODINGS] + [
    ("rope", {"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 16}, {}), ("rope", None, RNOPE_SWA)])
@pytest.mark.parametrize("flex", [False, True])
@torch.no_grad()
def test_cached_decoding_equals_a_full_forward_pass(position, scaling, layers, flex):
    # L = 16 (64 for learned, which stops at its table), decoded to 48 tokens. (A dynamic scaling sees
    # another length at every step, so it differs from a full pass by design: tests/test_model.py.)
    model = model_on_cuda(position, scaling, max_seq_len=64 if position == "learned" else 16, flex=flex,
                          **layers).eval()
    idx = batch(48)[0]
    full, _ = model(idx)
    cache = KVCache(model.cfg.n_layers)
    steps = [model(idx[:, :9], cache=cache)[0]] + [model(idx[:, i:i + 1], cache=cache)[0] for i in range(9, 48)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-4, rtol=1e-4)


@torch.no_grad()
def test_a_dynamic_scaling_decodes_a_chunk_as_token_by_token():
    # per_query_attention's complex rotors on CUDA: each query of a chunk turns the keys with its own frequencies
    scaling = {"type": "dynamic", "factor": 1.0, "original_max_position_embeddings": 16}
    model = model_on_cuda("rope", scaling, max_seq_len=16).eval()
    idx = batch(48)[0]

    def decode(chunk):
        cache = KVCache(model.cfg.n_layers)
        edges = [0, 16, *range(16 + chunk, 48, chunk), 48]
        return torch.cat([model(idx[:, a:b], cache=cache)[0] for a, b in zip(edges, edges[1:])], dim=1)
    torch.testing.assert_close(decode(7), decode(1), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("position, method", [("rope", "self-extend"), ("rope", "sinks"), ("alibi", "dca"),
                                              ("t5", "sinks"), ("fire", "leaky-rerope"), ("kerple", "logn")])
@torch.no_grad()
def test_a_context_method_on_flex_equals_sdpa_and_decodes_as_a_full_pass(position, method):
    # the method's bias read by FlexAttention (RoPE's two rotations merged eagerly), L = 16, 48 tokens
    from config import ContextConfig
    idx = batch(48)[0]
    logits = []
    for flex in (False, True):
        model = model_on_cuda(position, max_seq_len=16, flex=flex).eval()
        model.use_context_method(ContextConfig(method))
        full, _ = model(idx)
        cache = KVCache(model.cfg.n_layers)
        steps = [model(idx[:, :9], cache=cache)[0]] + [model(idx[:, i:i + 1], cache=cache)[0] for i in range(9, 48)]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-4, rtol=1e-4)
        logits.append(full)
    torch.testing.assert_close(logits[1], logits[0], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("position", ["rope", "alibi"])
def test_compiled_equals_eager(position):
    x, y = batch()
    results = []
    for compiled in (False, True):
        model = model_on_cuda(position, flex=position == "alibi")
        run = torch.compile(model) if compiled else model
        _, loss = run(x, y)
        loss.backward()
        results.append((loss.item(), grads(model)))
    (want, want_grads), (got, got_grads) = results
    assert got == pytest.approx(want, rel=1e-4)
    for name in want_grads:
        torch.testing.assert_close(got_grads[name], want_grads[name], atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("position", ["t5", "fire"])
def test_a_learned_bias_compiles_at_gpt2_small_head_size_in_bf16(position):
    # the bias table's tile once took flex's default sm90 blocks past the shared memory there is
    # (model/attention.py, TABLE_KERNEL_OPTIONS): head size 64 and 1,024 tokens, as configs/gpt2-124m.yaml
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=97, d_model=128, n_layers=1, n_heads=2, n_kv_heads=2, max_seq_len=1024,
                      position=PositionConfig(type=position))
    model = GPT(cfg).to(CUDA)
    model.use_flex_attention(True)
    x, y = batch(T=1024)
    losses = []
    for run in (model, torch.compile(model)):
        with autocast(CUDA):
            losses.append(run(x, y)[1])
        losses[-1].backward()
    assert losses[1].item() == pytest.approx(losses[0].item(), rel=1e-2)


@pytest.mark.parametrize("position", ENCODINGS)
@torch.no_grad()
def test_bf16_autocast_stays_close_to_float32(position):
    # bf16 keeps 8 bits of mantissa: the loss agrees to 1%, the next-token distributions to 0.05 nats.
    model = model_on_cuda(position, flex=position == "alibi").eval()
    x, y = batch()
    logits32, loss32 = model(x, y)
    with autocast(CUDA):
        logits16, loss16 = model(x, y)
    assert loss16.item() == pytest.approx(loss32.item(), rel=1e-2)
    p32, p16 = logits32.float().log_softmax(-1), logits16.float().log_softmax(-1)
    assert (p32.exp() * (p32 - p16)).sum(-1).max().item() < 0.05  # KL(fp32 || bf16) per position


@torch.no_grad()
def test_decoding_with_bf16_matrices_gives_autocasts_tokens_also_compiled():
    # generate.for_decoding holds the matrices in bf16 once: the same greedy tokens as float32 weights under
    # autocast, bit for bit eagerly; compiled (static cache, CUDA graphs) the same tokens while rounding between
    # the two paths decides no choice (logits spread by init_std 0.3)
    import copy

    from generate import compile_step, for_decoding, generate_tokens
    model = model_on_cuda("rope", max_seq_len=32, init_std=0.3).eval()
    rounded = for_decoding(copy.deepcopy(model))
    assert rounded.lm_head.weight.dtype == torch.bfloat16 and rounded.embed.weight.dtype == torch.float32
    prompt = list(range(8))
    want = list(generate_tokens(model, prompt, 60, temperature=0))
    assert list(generate_tokens(rounded, prompt, 60, temperature=0)) == want
    torch._dynamo.reset()
    compiled = list(generate_tokens(rounded, prompt, 60, temperature=0, step=compile_step(rounded)))
    assert compiled[:20] == want[:20]


def test_fused_adamw_equals_the_loop_implementation():
    x, y = batch()
    weights = []
    for fused in (False, True):
        model = model_on_cuda("rope")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=fused, foreach=False if not fused else None)
        for _ in range(3):
            model(x, y)[1].backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        weights.append({k: v.detach().clone() for k, v in model.state_dict().items()})
    for name in weights[0]:
        torch.testing.assert_close(weights[1][name], weights[0][name], atol=1e-5, rtol=1e-4)
