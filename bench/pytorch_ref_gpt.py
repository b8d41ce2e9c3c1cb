#!/usr/bin/env python3
"""The transformer workloads of bench/pytorch_ref.py (issue 49): mpdist's gpt as
bench/torch_models.py builds it (scaled_dot_product_attention, PyTorch's fused attention), in the
shapes of configs/fortunes-gpt.cfg and configs/gpt2-small.cfg, trained as those configs train
(AdamW at their learning rates, betas 0.9/0.95, weight decay 0.1, gradient norm clipped at 1.0),
on one batch of random bytes made on the GPU once. A module: run as a script it prints this and
exits."""
import sys

if __name__ == "__main__":
    print(__doc__)
    sys.exit(0)

import torch  # noqa: E402  (after the answer to --help, which needs no torch)
import torch.nn.functional as F  # noqa: E402

import torch_models  # noqa: E402

# The configs' shapes and learning rates: configs/fortunes-gpt.cfg and configs/gpt2-small.cfg.
SHAPES = {
    "gpt": dict(context=128, width=128, depth=4, heads=4, lr=1e-3),
    "gpt2-small": dict(context=1024, width=768, depth=12, heads=12, lr=3e-4),
}
DROPOUT = 0.1
CLIP = 1.0


def build(model):
    """The model on the GPU, in training mode, with PyTorch's fused attention."""
    torch_models.ATTENTION = "sdpa"
    s = SHAPES[model]
    net = torch_models.Gpt(s["context"], s["width"], s["depth"], s["heads"], DROPOUT)
    return net.cuda().train()


def adamw(params, lr):
    """AdamW as the configs set it, fused where this PyTorch has it; (optimizer, fused)."""
    params = list(params)
    kw = dict(lr=lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    try:
        return torch.optim.AdamW(params, fused=True, **kw), True
    except (TypeError, RuntimeError):
        return torch.optim.AdamW(params, foreach=True, **kw), False


def workload(model, batch):
    """(net, x, y, optimizer, fused, clip): windows of context + 1 random bytes, x the first
    context and y the next byte of each."""
    net = build(model)
    t = SHAPES[model]["context"]
    w = torch.randint(0, 256, (batch, t + 1), device="cuda")
    opt, fused = adamw(net.parameters(), SHAPES[model]["lr"])
    return net, w[:, :-1].contiguous(), w[:, 1:].contiguous(), opt, fused, CLIP


def loss(logits, y):
    """Mean cross-entropy over every position (mpdist's text loss)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))


def flops_per_sample(model):
    """Forward + backward FLOPs of one sequence (FP32, a separate copy), or None where the
    counter cannot follow the fused attention."""
    try:
        from torch.utils.flop_counter import FlopCounterMode
        net, x, y, _, _, _ = workload(model, 1)
        counter = FlopCounterMode(display=False)
        with counter:
            loss(net(x), y).backward()
        return counter.get_total_flops()
    except Exception:  # an older PyTorch without the counter or its attention rule
        return None
