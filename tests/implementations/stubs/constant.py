"""A stub with the right shapes and a gradient path: ratio 1 and loss 0. It must fail every
tier (check-exercise --corpus grades every file of stubs/ and holds it to that)."""

import torch


def sequence_ratio(logp, old_logp, mask):
    return torch.ones_like(logp[:, 0]) + 0 * torch.where(mask != 0, logp, 0.0).sum(-1)


def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    return 0 * torch.where(mask != 0, logp, 0.0).sum()
