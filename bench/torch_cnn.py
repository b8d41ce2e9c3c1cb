#!/usr/bin/env python3
"""The convolutional models of bench/pytorch_ref.py and bench/torch_models.py, layer for layer as
engine/presets.c and engine/layer_residual.c build them (convolutions without bias, BatchNorm
eps 1e-5 and momentum 0.1, linear head with bias): resnet20 (post-activation basic blocks) and
wrn16-4 (pre-activation wide blocks whose shortcut reads the raw input); see pytorch_ref.py's
description. A module: run as a script it prints this and exits."""
import sys

if __name__ == "__main__":
    print(__doc__)
    sys.exit(0)

import torch.nn as nn  # noqa: E402  (after the answer to --help, which needs no torch)


def conv3x3(cin, cout, stride):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


def shortcut(cin, cout, stride):
    """engine/layer_residual.c: conv1x1 - bn where the stride or the channels change."""
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))


class Basic(nn.Module):
    """ResNet basic block (post-activation)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.main = nn.Sequential(conv3x3(cin, cout, stride), nn.BatchNorm2d(cout),
                                  nn.ReLU(inplace=True), conv3x3(cout, cout, 1),
                                  nn.BatchNorm2d(cout))
        self.shortcut = shortcut(cin, cout, stride)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        sc = x if self.shortcut is None else self.shortcut(x)
        return self.relu(self.main(x) + sc)


class Wide(nn.Module):
    """Pre-activation wide block; the shortcut reads the raw input, as mpdist's does."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.main = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(inplace=True),
                                  conv3x3(cin, cout, stride),
                                  nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                                  conv3x3(cout, cout, 1))
        self.shortcut = shortcut(cin, cout, stride)

    def forward(self, x):
        sc = x if self.shortcut is None else self.shortcut(x)
        return self.main(x) + sc


def stages(block, cin, widths, per):
    layers = []
    for s, cout in enumerate(widths):
        for b in range(per):
            layers.append(block(cin, cout, 2 if s > 0 and b == 0 else 1))
            cin = cout
    return layers


def build(model, classes=10, channels=3):
    if model == "resnet20":
        body = [conv3x3(channels, 16, 1), nn.BatchNorm2d(16), nn.ReLU(inplace=True)]
        body += stages(Basic, 16, (16, 32, 64), (20 - 2) // 6)
        last = 64
    else:  # wrn16-4
        k = 4
        body = [conv3x3(channels, 16, 1)]
        body += stages(Wide, 16, (16 * k, 32 * k, 64 * k), (16 - 4) // 6)
        body += [nn.BatchNorm2d(64 * k), nn.ReLU(inplace=True)]
        last = 64 * k
    body += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(last, classes)]
    return nn.Sequential(*body)
