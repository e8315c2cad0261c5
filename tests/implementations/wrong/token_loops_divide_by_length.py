"""Loops over the tokens with branches on the mask, but divides by the padded length L instead
of the number of valid tokens.

Caught by: test_t0_edge_cases.py::test_advantages_dtype_does_not_change_result_dtype, test_t1_reference.py::test_ratio_matches_reference, test_t1_reference.py::test_loss_matches_reference, test_t1_reference.py::test_low_precision_matches_reference, test_t1_reference.py::test_ratio_matches_reference_hidden, test_t1_reference.py::test_loss_matches_reference_hidden, test_t1_reference.py::test_long_sequences_match_reference, test_t2_clipping.py::test_equal_token_gradient_weights, test_t2_clipping.py::test_positive_advantage_clips_above, test_t2_clipping.py::test_negative_advantage_clips_below, test_t2_clipping.py::test_clip_eps_sets_the_boundary, test_t2_clipping.py::test_long_sequences_stay_finite, test_t2_properties.py::test_geometric_mean_identity, test_t2_properties.py::test_empty_rows_in_every_dtype, test_t2_ratio_sweep.py::test_ratio_sweep_positive_advantages, test_t2_ratio_sweep.py::test_ratio_sweep_negative_advantages, test_t2_ratio_sweep.py::test_ratio_sweep_sequence_ratio, test_t3_toy.py::test_toy_ratios, test_t3_toy.py::test_row0_equal_gradients
"""

import torch
from torch import Tensor


def _mean_log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor, i: int) -> Tensor:
    wide = torch.promote_types(logp.dtype, torch.float32)
    total, count = logp.new_zeros((), dtype=wide), 0
    for t in range(logp.shape[1]):
        if mask[i, t]:
            total = total + (logp[i, t].to(wide) - old_logp[i, t].detach().to(wide))
            count += 1
    return total / logp.shape[1]


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    ratios = [_mean_log_ratio(logp, old_logp, mask, i).exp() for i in range(logp.shape[0])]
    if not ratios:
        return logp.new_ones(0)
    return torch.stack(ratios).to(logp.dtype)  # [B]


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    B = logp.shape[0]
    total = (torch.where(mask != 0, logp, 0.0) * 0).sum()  # a zero attached to logp
    for i in range(B):
        if not mask[i].any():
            continue  # an empty response adds nothing
        s = _mean_log_ratio(logp, old_logp, mask, i).exp()
        a = advantages[i].detach().to(s.dtype)
        total = total + torch.minimum(s * a, s.clamp(1 - clip_eps, 1 + clip_eps) * a)
    return (-total / max(B, 1)).to(logp.dtype)
