"""A DQN's online Q-network (an MLP from an 8-dimensional observation to 4 action values) and its TD loss,
which holds the frozen target network."""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn import functional as F

OBS = 8
ACTIONS = 4
HIDDEN = 32
GAMMA = 0.99


class QNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(OBS, HIDDEN)
        self.act1 = nn.ReLU()
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.act2 = nn.ReLU()
        self.fc3 = nn.Linear(HIDDEN, ACTIONS)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.fc3(self.act2(self.fc2(self.act1(self.fc1(obs)))))


class TDLoss(nn.Module):
    """SmoothL1 (beta 1) between Q(obs, action) and reward + gamma * max_a target(next_obs) * (1 - done)."""

    def __init__(self, online: QNet) -> None:
        super().__init__()
        self.target = copy.deepcopy(online).requires_grad_(False)

    def forward(self, q: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        q_taken = q.gather(1, batch["action"].unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            next_q = self.target(batch["next_obs"]).max(dim=1).values
            td_target = batch["reward"] + GAMMA * next_q * (1 - batch["done"])
        return F.smooth_l1_loss(q_taken, td_target, beta=1.0)
