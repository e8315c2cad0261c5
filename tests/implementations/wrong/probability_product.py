"""Multiplies token probabilities (exp of log-probs) and takes the T-th root: underflows to
0/0 for long responses.
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    p_new = torch.where(valid, torch.exp(torch.where(valid, logp, 0.0)), 1.0).prod(-1)
    p_old = torch.where(valid, torch.exp(torch.where(valid, old_logp.detach(), 0.0)), 1.0).prod(-1)
    lengths = valid.sum(-1).clamp(min=1)
    return (p_new / p_old) ** (1.0 / lengths)


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    ratio = sequence_ratio(logp, old_logp, mask)  # [B]
    adv = advantages.detach()  # [B]
    objective = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    objective = torch.where((mask != 0).any(-1), objective, 0.0)  # empty responses add 0
    return -objective.mean()
