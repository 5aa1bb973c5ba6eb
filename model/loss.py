"""Next-token cross-entropy from the final hidden states, a chunk of tokens at a time.

A token's loss needs only its own row of logits, so the output projection and the loss can run over a few tokens at
once: at Gemma 3's vocabulary of 262,144 the float32 logits of 32k tokens are 34 GB, and in chunks of LOGITS_BYTES
256 MiB. `head` is the output projection (GPT.lm_head; a transformers model's lm_head and final soft-capping):
  - `token_losses`: every token's loss (evaluation), no (tokens x vocab) tensor larger than a chunk's;
  - `mean_loss`: the training loss, each chunk's logits recomputed in the backward pass (torch.utils.checkpoint), so
    only one chunk's logits and their gradient live at once. GPT.forward takes it only where a step's float32 logits
    would pass CHUNKED_ABOVE (`in_chunks`): below, one cross-entropy over the whole logits is the same number up to
    rounding and faster, the recomputed projection costing a third of its own FLOPs more. At 4 GiB the committed
    configs keep that path (gpt2-124m's micro-batch of 16 x 1,024 tokens at vocabulary 32,768 has 2 GiB of logits,
    minimind-26m's 400 MiB), and a 262,144-token vocabulary goes in chunks past 4,096 tokens a step.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

LOGITS_BYTES = 256 << 20  # float32 logits of one chunk
CHUNKED_ABOVE = 4 << 30  # training: float32 logits of a step past which its loss goes in chunks


def in_chunks(tokens: int, vocab_size: int) -> bool:
    """Whether the training loss of `tokens` tokens goes in chunks (mean_loss)."""
    return 4 * tokens * vocab_size > CHUNKED_ABOVE


def chunk_tokens(vocab_size: int) -> int:
    """Tokens whose float32 logits fit in LOGITS_BYTES."""
    return max(1, LOGITS_BYTES // (4 * vocab_size))


def token_losses(head, x: torch.Tensor, targets: torch.Tensor, chunk: int) -> torch.Tensor:
    """Cross-entropy (B, T) in float32 of the logits head(x) of hidden states x (B, T, C) against targets (B, T)
    (-1: not scored, loss 0), `chunk` scored tokens at a time: only the scored tokens' logits are made, so scoring
    the last 256 tokens of a 32k window costs 256 rows of the output projection, not 32k."""
    x, targets_ = x.flatten(0, 1), targets.flatten()
    losses = torch.zeros(len(targets_), device=x.device)
    scored = (targets_ != -1).nonzero().squeeze(1)
    for i in range(0, len(scored), chunk):
        rows = scored[i:i + chunk]
        losses[rows] = F.cross_entropy(head(x[rows]).float(), targets_[rows], reduction="none")
    return losses.view(targets.shape)


def summed_loss(head, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(head(x).float(), targets, ignore_index=-1, reduction="sum")


def mean_loss(head, x: torch.Tensor, targets: torch.Tensor, chunk: int) -> torch.Tensor:
    """The mean cross-entropy over the scored targets (not -1), as F.cross_entropy over head(x) (B, T, V) gives it,
    `chunk` tokens at a time, each chunk's logits recomputed in the backward pass instead of kept."""
    x, targets = x.flatten(0, 1), targets.flatten()
    total = sum(checkpoint(summed_loss, head, x[i:i + chunk], targets[i:i + chunk], use_reentrant=False)
                for i in range(0, len(targets), chunk))
    return total / (targets != -1).sum()
