"""Correct: GSPO-token with one advantage per response: s_it = sg(s_i) * exp(logp_t -
sg(logp_t)), token objectives averaged per response.
"""

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
    current = torch.where(valid, logp, 0.0)  # [B, L], padding removed before any arithmetic
    old = torch.where(valid, old_logp.detach(), 0.0)  # [B, L]
    lengths = valid.sum(-1).clamp(min=1)  # [B]
    s = torch.exp((current - old).sum(-1) / lengths)  # [B]
    s_token = s.detach().unsqueeze(-1) * torch.exp(current - current.detach())  # [B, L], value s
    adv = advantages.detach().to(logp.dtype).unsqueeze(-1)  # [B, 1]
    clipped = s_token.clamp(1 - clip_eps, 1 + clip_eps)
    token_obj = torch.where(valid, torch.minimum(s_token * adv, clipped * adv), 0.0)  # [B, L]
    return -(token_obj.sum(-1) / lengths).sum() / max(logp.shape[0], 1)
