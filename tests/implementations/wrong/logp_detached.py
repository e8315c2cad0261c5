"""Detaches logp as well as old_logp: no gradient reaches the policy.

Caught by: test_t0_contract.py::test_gradient_reaches_logp, test_t0_edge_cases.py::test_advantages_dtype_does_not_change_result_dtype, test_t0_edge_cases.py::test_empty_batch, test_t1_reference.py::test_ratio_matches_reference, test_t1_reference.py::test_loss_matches_reference, test_t1_reference.py::test_low_precision_matches_reference, test_t1_reference.py::test_ratio_matches_reference_hidden, test_t1_reference.py::test_loss_matches_reference_hidden, test_t1_reference.py::test_long_sequences_match_reference, test_t1_reference.py::test_long_half_precision_matches_reference, test_t2_clipping.py::test_equal_token_gradient_weights, test_t2_clipping.py::test_positive_advantage_clips_above, test_t2_clipping.py::test_negative_advantage_clips_below, test_t2_clipping.py::test_clip_eps_sets_the_boundary, test_t2_clipping.py::test_duplicating_tokens_leaves_loss_unchanged, test_t2_clipping.py::test_permuting_responses_permutes_ratios, test_t2_clipping.py::test_long_sequences_stay_finite, test_t2_padding.py::test_padding_neutralized_in_ratio, test_t2_padding.py::test_padding_neutralized_in_loss, test_t2_padding.py::test_padding_mixture_neutralized, test_t2_properties.py::test_geometric_mean_identity, test_t2_properties.py::test_empty_response_has_ratio_one, test_t2_properties.py::test_empty_response_contributes_zero_but_counts, test_t2_properties.py::test_all_empty_mask_gives_differentiable_zero, test_t2_properties.py::test_empty_rows_in_every_dtype, test_t2_ratio_sweep.py::test_ratio_sweep_positive_advantages, test_t2_ratio_sweep.py::test_ratio_sweep_negative_advantages, test_t2_ratio_sweep.py::test_ratio_sweep_zero_advantages, test_t2_ratio_sweep.py::test_ratio_sweep_sequence_ratio, test_t3_toy.py::test_row0_equal_gradients, test_t3_toy.py::test_row1_positive_advantage_clipped, test_t3_toy.py::test_row2_negative_advantage_clipped, test_t3_toy.py::test_padding_gets_zero_gradient, test_t3_toy.py::test_sweep_curves_follow_clipped_surrogate
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0  # [B, L]
    log_ratio = torch.where(valid, logp.detach() - old_logp.detach(), 0.0)  # [B, L]
    lengths = valid.sum(-1).clamp(min=1)  # [B]
    return torch.exp(log_ratio.sum(-1) / lengths)  # [B]


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    ratio = sequence_ratio(logp, old_logp, mask)  # [B]
    adv = advantages.detach().to(ratio.dtype)  # [B], frozen, in the dtype of logp
    objective = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    objective = torch.where((mask != 0).any(-1), objective, 0.0)  # empty responses add 0
    return -objective.sum() / max(logp.shape[0], 1)  # mean over all B; 0 when B = 0
