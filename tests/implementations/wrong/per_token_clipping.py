"""GRPO-style: clips every token ratio separately, then averages the token objectives."""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    log_ratio = torch.where(valid, logp - old_logp.detach(), 0.0)  # [B, L]
    lengths = valid.sum(-1).clamp(min=1)  # [B]
    return torch.exp(log_ratio.sum(-1) / lengths)  # [B]


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    valid = mask != 0
    token_ratio = torch.exp(torch.where(valid, logp - old_logp.detach(), 0.0))  # [B, L]
    adv = advantages.detach().unsqueeze(-1)
    token_obj = torch.minimum(
        token_ratio * adv, token_ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv
    )
    token_obj = torch.where(valid, token_obj, 0.0)
    objective = token_obj.sum(-1) / valid.sum(-1).clamp(min=1)
    return -objective.mean()
