"""Takes torch.nanmean over NaN-filled padding but forgets to replace the NaN mean of an empty
response: its ratio comes out nan.

Caught by: test_t0_contract.py::test_mask_types, test_t1_reference.py::test_ratio_matches_reference, test_t1_reference.py::test_low_precision_matches_reference, test_t1_reference.py::test_ratio_matches_reference_hidden, test_t1_reference.py::test_long_half_precision_matches_reference, test_t2_clipping.py::test_duplicating_tokens_leaves_loss_unchanged, test_t2_clipping.py::test_permuting_responses_permutes_ratios, test_t2_properties.py::test_empty_response_has_ratio_one, test_t2_properties.py::test_all_empty_mask_gives_differentiable_zero, test_t2_properties.py::test_empty_rows_in_every_dtype, test_t2_ratio_sweep.py::test_ratio_sweep_sequence_ratio
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    log_ratio = torch.where(valid, logp - old_logp.detach(), float("nan"))  # [B, L]
    mean = torch.nanmean(log_ratio, dim=-1)  # [B]; nan for an empty response
    return torch.exp(mean)


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    ratio = sequence_ratio(logp, old_logp, mask)  # [B]
    adv = advantages.detach().to(ratio.dtype)
    objective = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    objective = torch.where((mask != 0).any(-1), objective, 0.0)
    return -torch.nansum(objective) / max(logp.shape[0], 1)
