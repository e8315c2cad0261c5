"""Fills padded log-ratios with 1 (the neutral token ratio) instead of 0 (the neutral log-
ratio).

Caught by: test_t0_contract.py::test_gradient_reaches_logp, test_t0_edge_cases.py::test_advantages_dtype_does_not_change_result_dtype, test_t1_reference.py::test_ratio_matches_reference, test_t1_reference.py::test_loss_matches_reference, test_t1_reference.py::test_low_precision_matches_reference, test_t1_reference.py::test_ratio_matches_reference_hidden, test_t1_reference.py::test_loss_matches_reference_hidden, test_t1_reference.py::test_long_sequences_match_reference, test_t1_reference.py::test_long_half_precision_matches_reference, test_t2_clipping.py::test_equal_token_gradient_weights, test_t2_clipping.py::test_positive_advantage_clips_above, test_t2_clipping.py::test_negative_advantage_clips_below, test_t2_clipping.py::test_clip_eps_sets_the_boundary, test_t2_clipping.py::test_duplicating_tokens_leaves_loss_unchanged, test_t2_clipping.py::test_long_sequences_stay_finite, test_t2_properties.py::test_geometric_mean_identity, test_t2_properties.py::test_empty_response_has_ratio_one, test_t2_properties.py::test_all_empty_mask_gives_differentiable_zero, test_t2_properties.py::test_empty_rows_in_every_dtype, test_t2_ratio_sweep.py::test_ratio_sweep_positive_advantages, test_t2_ratio_sweep.py::test_ratio_sweep_negative_advantages, test_t2_ratio_sweep.py::test_ratio_sweep_sequence_ratio, test_t3_toy.py::test_toy_ratios, test_t3_toy.py::test_row0_equal_gradients, test_t3_toy.py::test_toy_loss
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    padding = mask == 0  # [B, L]
    log_ratio = (logp - old_logp.detach()).masked_fill(padding, 1.0)  # [B, L]
    lengths = (~padding).sum(-1).to(log_ratio.dtype)  # [B]
    return torch.exp(log_ratio.sum(-1) / lengths.clamp(min=1.0))


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    ratio = sequence_ratio(logp, old_logp, mask)
    adv = advantages.detach().type_as(ratio)
    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * adv)
    empty = (mask == 0).all(-1)  # [B]
    return -surrogate.masked_fill(empty, 0.0).sum() / max(logp.shape[0], 1)
