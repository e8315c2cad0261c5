"""PPO/GRPO-style: clips every token's own ratio, then averages the token objectives of each
response.

Caught by: test_t0_edge_cases.py::test_advantages_dtype_does_not_change_result_dtype, test_t1_reference.py::test_loss_matches_reference, test_t1_reference.py::test_low_precision_matches_reference, test_t1_reference.py::test_loss_matches_reference_hidden, test_t1_reference.py::test_long_sequences_match_reference, test_t2_clipping.py::test_equal_token_gradient_weights, test_t2_clipping.py::test_positive_advantage_clips_above, test_t2_clipping.py::test_negative_advantage_clips_below, test_t2_clipping.py::test_clip_eps_sets_the_boundary, test_t2_clipping.py::test_long_sequences_stay_finite, test_t2_properties.py::test_empty_rows_in_every_dtype, test_t2_ratio_sweep.py::test_ratio_sweep_positive_advantages, test_t2_ratio_sweep.py::test_ratio_sweep_negative_advantages, test_t3_toy.py::test_row0_equal_gradients, test_t3_toy.py::test_row1_positive_advantage_clipped, test_t3_toy.py::test_row2_negative_advantage_clipped, test_t3_toy.py::test_toy_loss
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
    s_token = torch.exp(current - old)  # [B, L], value s
    adv = advantages.detach().to(logp.dtype).unsqueeze(-1)  # [B, 1]
    clipped = s_token.clamp(1 - clip_eps, 1 + clip_eps)
    token_obj = torch.where(valid, torch.minimum(s_token * adv, clipped * adv), 0.0)  # [B, L]
    return -(token_obj.sum(-1) / lengths).sum() / max(logp.shape[0], 1)
