"""Losses from the final hidden states a chunk of tokens at a time (model/loss.py): the same values and gradients as
one cross-entropy over the whole logits, for GPT's training loss and per-token losses, a transformers model's (Gemma's
final soft-capping included), and the evaluation path at a 262,144-token vocabulary calling the output projection on
one chunk at a time."""
import pytest
import torch
import torch.nn.functional as F

import model.loss as loss_module
from config import ModelConfig
from eval.extrapolation import window_losses
from eval.probe import losses as probe_losses
from model.gpt import GPT
from model.loss import chunk_tokens, in_chunks, mean_loss, token_losses


def tiny(vocab=97, **kw):
    shape = dict(d_model=32, n_heads=4, n_kv_heads=2, n_layers=2, max_seq_len=64) | kw
    cfg = ModelConfig(vocab_size=vocab, **shape)
    cfg.validate()
    torch.manual_seed(0)
    return GPT(cfg)


def head_rows(module):
    """The number of tokens of each call of `module` (an output projection), recorded by a forward hook."""
    rows = []
    module.register_forward_hook(lambda m, inputs, out: rows.append(inputs[0].shape[:-1].numel()))
    return rows


def test_chunked_losses_are_the_whole_cross_entropy():
    g = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(16, 50, bias=False)
    x, targets = torch.randn(3, 20, 16, generator=g), torch.randint(0, 50, (3, 20), generator=g)
    targets[0, :5] = -1  # not scored
    whole = F.cross_entropy(head(x).transpose(1, 2), targets, ignore_index=-1, reduction="none")
    for chunk in (1, 7, 60, 1000):
        torch.testing.assert_close(token_losses(head, x, targets, chunk), whole, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(mean_loss(head, x, targets, chunk), whole.sum() / (targets != -1).sum(),
                                   rtol=1e-6, atol=1e-6)


def test_the_training_loss_in_chunks_has_the_values_and_gradients_of_the_whole_one(monkeypatch):
    model = tiny()
    idx, targets = torch.randint(0, 97, (2, 3, 40), generator=torch.Generator().manual_seed(1))
    targets[1, 30:] = -1
    rows, results = head_rows(model.lm_head), []
    for chunked in (False, True):
        if chunked:  # every step in chunks of 11 tokens (LOGITS_BYTES: 11 rows of float32 logits)
            monkeypatch.setattr(loss_module, "CHUNKED_ABOVE", 0)
            monkeypatch.setattr(loss_module, "LOGITS_BYTES", 11 * 4 * 97)
        rows.clear()
        model.zero_grad()
        logits, loss = model(idx, targets)
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters()], logits))
    (whole, whole_grads, logits), (chunked, chunked_grads, no_logits) = results
    assert logits.shape == (3, 40, 97) and no_logits is None  # in chunks the logits are never built whole
    assert max(rows) == 11 and sum(rows) == 2 * 120  # forward, then each chunk again in the backward pass
    torch.testing.assert_close(chunked, whole, rtol=1e-6, atol=1e-6)
    for a, b in zip(chunked_grads, whole_grads):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_small_models_keep_the_whole_loss_and_a_large_vocabulary_goes_in_chunks():
    assert not in_chunks(16 * 256, 4096)  # configs/tiny.yaml
    assert not in_chunks(16 * 1024, 32768) and not in_chunks(32 * 512, 6400)  # gpt2-124m, minimind-26m micro-batches
    assert in_chunks(32768, 262144) and chunk_tokens(262144) == 256  # Gemma 3 at 32k tokens: 256-token chunks


@torch.no_grad()
def test_per_token_losses_are_the_cross_entropy_of_the_logits(monkeypatch):
    model = tiny().eval()
    idx, targets = torch.randint(0, 97, (2, 2, 50), generator=torch.Generator().manual_seed(2))
    whole = F.cross_entropy(model(idx)[0].transpose(1, 2), targets, reduction="none")
    monkeypatch.setattr(loss_module, "LOGITS_BYTES", 9 * 4 * 97)
    rows = head_rows(model.lm_head)
    torch.testing.assert_close(model.token_losses(idx, targets), whole, rtol=1e-6, atol=1e-6)
    assert max(rows) == 9 and sum(rows) == 100
    # through the KV cache (eval.extrapolation's decoding of a dynamic scaling), and eval.probe's losses
    torch.testing.assert_close(window_losses(model, idx, targets, 20, 7), whole, rtol=1e-5, atol=1e-5)
    sequences = torch.cat([idx, targets[:, -1:]], dim=1)
    torch.testing.assert_close(probe_losses(model, sequences, torch.device("cpu")),
                               F.cross_entropy(model(sequences[:, :-1])[0].transpose(1, 2), sequences[:, 1:],
                                               reduction="none"), rtol=1e-6, atol=1e-6)


@torch.no_grad()
def test_evaluation_at_a_262k_vocabulary_never_projects_more_than_a_chunk():
    V, T = 262144, 1024  # the whole logits: 1 GiB in float32; a chunk: 256 tokens, 256 MiB
    model = tiny(vocab=V, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1).eval()
    idx, targets = torch.randint(0, V, (2, 1, T), generator=torch.Generator().manual_seed(3))
    hidden = []
    model.norm.register_forward_hook(lambda m, inputs, out: hidden.append(out))
    rows = head_rows(model.lm_head)
    nll = window_losses(model, idx, targets, None, 16)
    assert nll.shape == (1, T) and rows == [256] * 4
    some = [0, 255, 256, 1023]  # the first and last token of chunks, by hand from the final hidden states
    want = F.cross_entropy(model.lm_head(hidden[0][0, some]), targets[0, some], reduction="none")
    torch.testing.assert_close(nll[0, some], want, rtol=1e-6, atol=1e-6)


def hf_model(kind: str):
    transformers = pytest.importorskip("transformers")
    from hf.checkpoints import HFModel
    torch.manual_seed(0)
    shape = dict(vocab_size=101, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=128)
    if kind == "llama":
        config = transformers.LlamaConfig(**shape)
    else:  # Gemma 3 with a final soft-capping its forward applies (and sliding layers of 8 tokens)
        config = transformers.Gemma3TextConfig(**shape, head_dim=8, sliding_window=8, final_logit_softcapping=3.0,
                                               layer_types=["sliding_attention", "full_attention"])
    config._attn_implementation = "sdpa"
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    return HFModel(model, ModelConfig(vocab_size=101), None)


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
@torch.no_grad()
def test_a_transformers_model_gives_its_own_logits_losses_in_chunks(kind, monkeypatch):
    model = hf_model(kind)
    model.hf.get_output_embeddings().weight.mul_(50)  # logits past the cap, so that a cap left out would show
    idx, targets = torch.randint(0, 101, (2, 2, 30), generator=torch.Generator().manual_seed(4))
    logits = model(idx)[0]
    if kind == "gemma3":
        assert logits.abs().max() <= 3.0 and (logits.abs() > 2.0).any()  # soft-capped at 3, and it shows
    whole = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    monkeypatch.setattr(loss_module, "LOGITS_BYTES", 8 * 4 * 101)
    rows = head_rows(model.hf.get_output_embeddings())
    torch.testing.assert_close(model.token_losses(idx, targets), whole, rtol=1e-5, atol=1e-5)
    assert max(rows) == 8 and sum(rows) == 60
    # through the cache as eval.extrapolation decodes
    torch.testing.assert_close(window_losses(model, idx, targets, 12, 5), whole, rtol=1e-4, atol=1e-4)
