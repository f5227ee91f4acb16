"""The PyTorch model the burn port in src/main.rs reproduces: a small convolutional VAE."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class VAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc_conv1 = nn.Conv2d(1, 8, 3, stride=2, padding=1)
        self.enc_act1 = nn.ReLU()
        self.enc_conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.enc_act2 = nn.ReLU()
        self.fc_mu = nn.Linear(16 * 4 * 4, 8)
        self.fc_logvar = nn.Linear(16 * 4 * 4, 8)
        self.dec_fc = nn.Linear(8, 16 * 4 * 4)
        self.dec_act1 = nn.ReLU()
        self.dec_conv1 = nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1)
        self.dec_act2 = nn.ReLU()
        self.dec_conv2 = nn.ConvTranspose2d(8, 1, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x: torch.Tensor, eps: torch.Tensor):
        h = self.enc_act1(self.enc_conv1(x))
        h = self.enc_act2(self.enc_conv2(h))
        h = h.flatten(1)
        mu = self.fc_mu(h)
        logvar = self.fc_logvar(h)
        z = mu + eps * torch.exp(0.5 * logvar)
        d = self.dec_act1(self.dec_fc(z))
        d = d.view(-1, 16, 4, 4)
        d = self.dec_act2(self.dec_conv1(d))
        recon_logits = self.dec_conv2(d)
        return recon_logits, mu, logvar


def vae_loss(output, batch):
    recon_logits, mu, logvar = output
    x = batch["x"]
    bce = F.binary_cross_entropy_with_logits(recon_logits, x, reduction="sum")
    kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return (bce + kl) / x.shape[0]
