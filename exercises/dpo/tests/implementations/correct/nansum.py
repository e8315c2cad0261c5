"""Correct: padding replaced by NaN and skipped by nansum (an empty response sums to 0, and
nansum sends no gradient to the NaN it skipped), and the loss as minus the log-likelihood of
"the chosen response wins" under a Bernoulli whose logit is the margin."""

import torch
from torch import Tensor
from torch.distributions import Bernoulli


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    padded = torch.where(mask != 0, token_logp, torch.nan)  # [B, L], padding is NaN
    return padded.nansum(-1)  # [B]


def dpo_loss(
    policy_chosen_logp: Tensor,
    policy_rejected_logp: Tensor,
    ref_chosen_logp: Tensor,
    ref_rejected_logp: Tensor,
    beta: float = 0.1,
) -> Tensor:
    if beta <= 0:
        raise ValueError(f"beta must be positive; got {beta}")
    chosen_logratio = policy_chosen_logp - ref_chosen_logp.detach()  # [B]
    rejected_logratio = policy_rejected_logp - ref_rejected_logp.detach()  # [B]
    margin = beta * (chosen_logratio - rejected_logratio)  # [B]
    wins = Bernoulli(logits=margin, validate_args=False)
    log_likelihood = wins.log_prob(torch.ones_like(margin))  # [B], log sigmoid(m)
    return -log_likelihood.sum() / max(margin.shape[0], 1)
