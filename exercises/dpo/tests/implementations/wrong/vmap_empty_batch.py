"""Maps the per-pair loss over the batch with torch.func.vmap and forgets that vmap cannot
map over an empty batch (B = 0 raises instead of giving a zero loss).

Caught by: test_t2_properties.py::test_empty_batch_gives_differentiable_zero
"""

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import vmap


def _one_response(row: Tensor, row_mask: Tensor) -> Tensor:
    return torch.where(row_mask != 0, row, torch.zeros_like(row)).sum()


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    if token_logp.shape[0] == 0:
        return token_logp.sum(-1)
    return vmap(_one_response)(token_logp, mask)  # [B]


def dpo_loss(
    policy_chosen_logp: Tensor,
    policy_rejected_logp: Tensor,
    ref_chosen_logp: Tensor,
    ref_rejected_logp: Tensor,
    beta: float = 0.1,
) -> Tensor:
    if beta <= 0:
        raise ValueError(f"beta must be positive; got {beta}")

    def one_pair(pc: Tensor, pr: Tensor, rc: Tensor, rr: Tensor) -> Tensor:
        return -F.logsigmoid(beta * ((pc - rc) - (pr - rr)))

    ref_c, ref_r = ref_chosen_logp.detach(), ref_rejected_logp.detach()
    return vmap(one_pair)(policy_chosen_logp, policy_rejected_logp, ref_c, ref_r).mean()
