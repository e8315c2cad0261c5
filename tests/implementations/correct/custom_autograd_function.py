"""Correct: a torch.autograd.Function whose backward is written by hand from the paper's
gradient: every valid token of an unclipped response gets -s*A/(B*T), all others 0.
"""

import torch
from torch import Tensor


def _parts(logp: Tensor, old_logp: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    valid = mask != 0  # [B, L]
    wide = torch.promote_types(logp.dtype, torch.float32)
    log_ratio = torch.where(valid, logp.to(wide) - old_logp.detach().to(wide), 0.0)
    lengths = valid.sum(-1).clamp(min=1).to(wide)  # [B]
    return valid, torch.exp(log_ratio.sum(-1) / lengths), lengths


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    return _parts(logp, old_logp, mask)[1].to(logp.dtype)


class _GSPOLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logp, old_logp, advantages, mask, clip_eps):
        valid, s, lengths = _parts(logp, old_logp, mask)  # [B, L], [B], [B]
        adv = advantages.to(s.dtype)
        objective = torch.minimum(s * adv, s.clamp(1 - clip_eps, 1 + clip_eps) * adv)
        nonempty = valid.any(-1)
        objective = torch.where(nonempty, objective, 0.0)
        B = max(logp.shape[0], 1)
        clipped = ((adv > 0) & (s > 1 + clip_eps)) | ((adv < 0) & (s < 1 - clip_eps))
        weight = torch.where(clipped | ~nonempty, 0.0, -s * adv / (B * lengths))  # [B]
        ctx.save_for_backward(torch.where(valid, weight.unsqueeze(-1), 0.0).to(logp.dtype))
        return (-objective.sum() / B).to(logp.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        (token_weight,) = ctx.saved_tensors  # [B, L], d loss / d logp
        return grad_output * token_weight, None, None, None, None


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    return _GSPOLoss.apply(logp, old_logp.detach(), advantages.detach(), mask, clip_eps)
