#!/usr/bin/env python3
"""PyTorch reference for bench/gpu_step.sh: the training step of the same model, batch and input
shape as mpdist, timed on one GPU.

Models match engine/presets.c and engine/layer_residual.c layer for layer (convolutions without
bias, BatchNorm eps 1e-5 and momentum 0.1, linear head with bias):
  resnet20  conv 16 - bn - relu; 3 stages of 3 basic blocks (16, 32, 64 channels; strides 1, 2,
            2): conv3x3 - bn - relu - conv3x3 - bn, plus a shortcut (conv1x1 with the block's
            stride - bn) where the stride or the channels change, summed, then relu; global
            average pool, linear.
  wrn16-4   conv 16 (no bn, no relu); 3 stages of 2 pre-activation wide blocks (64, 128, 256
            channels; strides 1, 2, 2): bn - relu - conv3x3 - bn - relu - conv3x3, plus a shortcut
            taken from the block's raw input (conv1x1 with the block's stride - bn) where the
            stride or the channels change, summed with no relu; bn - relu, global average pool,
            linear.
  gpt,      mpdist's gpt (bench/torch_models.py's twin, scaled_dot_product_attention) in the
  gpt2-small shapes of configs/fortunes-gpt.cfg (width 128, 4 blocks of 4 heads, context 128) and
            configs/gpt2-small.cfg (768, 12 blocks of 12 heads, context 1024), dropout 0.1,
            AdamW (betas 0.9/0.95, weight decay 0.1, fused where it exists) with the gradient
            norm clipped at 1.0, as the configs train (bench/pytorch_ref_gpt.py).
Input: one synthetic batch made on the GPU once and reused every step, so no data-loader cost
enters (mpdist's batches are prefetched): 32x32x3 images (standard normal) and labels, or
windows of random bytes (gpt). images_per_s counts samples (gpt: sequences; tokens_per_s too).

Modes (as PyTorch's users run it on a GPU):
  fp32          FP32 everywhere, TF32 off for matmuls and cuDNN; NCHW; SGD(fused=True).
  amp           torch.autocast(float16) + torch.amp.GradScaler; model and input channels_last;
                SGD(fused=True).
  amp-bf16      torch.autocast(bfloat16), no scaler (bf16 needs none); channels_last.
  amp-compile   amp with the model wrapped in torch.compile (default mode, inductor); where it
                does not work on the machine (no triton, no compiler) the run exits 3 with
                "pytorch_ref: torch.compile failed: REASON" and gpu_step.sh shows that reason.
The convolutional models use SGD lr 0.1, momentum 0.9, nesterov, weight decay 5e-4
(configs/cifar-wrn16-4.cfg); all use cudnn.benchmark = True (PyTorch picks its fastest convolution
algorithms in the warm-up).

What is measured: `--warmup` steps, torch.cuda.synchronize(), `--steps` timed steps between two
CUDA events recorded on the current stream, torch.cuda.synchronize(). images_per_s = batch *
steps / host elapsed, step_ms = host elapsed / steps, device_ms = the events' elapsed time /
steps (device time, idle gaps included, as mpdist's step records' device_ms).
Memory, counted as gpu_step.sh counts mpdist's:
  device_peak_bytes       torch.cuda.max_memory_allocated() after torch.cuda.reset_peak_memory_stats()
                          taken before the model is built: weights, gradients, optimizer state, the
                          input batch, activations and the cuDNN/cuBLAS workspaces PyTorch allocates
                          (device allocations only: not the CUDA context, not the caching
                          allocator's unused reserve). steady_device_peak_bytes: the same over the
                          timed steps only (without the warm-up's cudnn.benchmark trials).
  device_used_peak_bytes  the most of torch.cuda.mem_get_info()'s total - free seen after the
                          model is built, after the warm-up and after the timed steps: the whole
                          device's use as cudaMemGetInfo reports it, the CUDA context and the
                          caching allocator's reserve included.
  host_peak_bytes         the process's peak resident set (ru_maxrss), for the host column.
train_flops_per_image counts forward + backward of one
image with torch.utils.flop_counter.FlopCounterMode (convolutions and matmuls, 2 per
multiply-add; BatchNorm, ReLU and the optimizer are not counted), in FP32 on a separate copy.

Prints one line of JSON. Usage:
  python3 bench/pytorch_ref.py --model wrn16-4 --batch 128 --mode amp --steps 100 --warmup 20
"""
import argparse
import json
import os
import resource
import sys
import time


def arg_parser():
    """The command line; built before torch is imported, so --help works without it."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("wrn16-4", "resnet20", "gpt", "gpt2-small"),
                   default="wrn16-4")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--mode", choices=("fp32", "amp", "amp-bf16", "amp-compile"), default="amp")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=20)
    return p


if __name__ == "__main__":
    arg_parser().parse_args()  # --help and usage errors answer here, without torch

try:
    import torch
    import torch.nn as nn
except ImportError as e:
    print(f"pytorch_ref: cannot import torch ({e})", file=sys.stderr)
    sys.exit(1)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_cnn import build  # noqa: E402  (bench/, beside this file)

TEXT_MODELS = ("gpt", "gpt2-small")


def text_workloads():
    """bench/pytorch_ref_gpt.py (beside this file), imported for the text models only: it
    needs numpy through bench/torch_models.py."""
    import pytorch_ref_gpt
    return pytorch_ref_gpt


def flops_per_image(model, batch):
    """Forward + backward FLOPs of `batch` images, divided by batch (FP32, a separate copy)."""
    from torch.utils.flop_counter import FlopCounterMode
    net = build(model).cuda().train()
    x = torch.randn(batch, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    counter = FlopCounterMode(display=False)
    with counter:
        nn.functional.cross_entropy(net(x), y).backward()
    return counter.get_total_flops() / batch


def grad_scaler():
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda")
    return torch.cuda.amp.GradScaler()


def sgd(params):
    """SGD as in configs/cifar-wrn16-4.cfg, fused when this PyTorch has it (2.3 and later)."""
    params = list(params)
    kw = dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    try:
        return torch.optim.SGD(params, fused=True, **kw), True
    except (TypeError, RuntimeError):
        return torch.optim.SGD(params, foreach=True, **kw), False


def device_used():
    """Bytes of the device in use by every process (cudaMemGetInfo's total - free)."""
    free, total = torch.cuda.mem_get_info()
    return total - free


def run(args):
    torch.backends.cudnn.benchmark = True
    tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    text = args.model in TEXT_MODELS
    gpt = text_workloads() if text else None
    flops = gpt.flops_per_sample(args.model) if text else flops_per_image(args.model, 1)
    torch.cuda.empty_cache()  # the counting copy's blocks, not to be counted as the run's
    torch.manual_seed(0)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    amp = args.mode != "fp32"
    half = torch.bfloat16 if args.mode == "amp-bf16" else torch.float16
    if text:
        net, x, y, opt, fused, clip = gpt.workload(args.model, args.batch)
        loss_fn = gpt.loss
    else:
        fmt = torch.channels_last if amp else torch.contiguous_format
        net = build(args.model).cuda().to(memory_format=fmt).train()
        opt, fused = sgd(net.parameters())
        x = torch.randn(args.batch, 3, 32, 32, device="cuda").to(memory_format=fmt)
        y = torch.randint(0, 10, (args.batch,), device="cuda")
        loss_fn, clip = nn.CrossEntropyLoss(), None
    scaler = grad_scaler() if amp and half == torch.float16 else None
    used = [device_used()]
    fwd = net
    if args.mode == "amp-compile":
        fwd = torch.compile(net)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=half, enabled=amp):
            loss = loss_fn(fwd(x), y)
        (scaler.scale(loss) if scaler else loss).backward()
        if clip:
            if scaler:
                scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(net.parameters(), clip)
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()

    try:
        for _ in range(args.warmup):
            step()
        torch.cuda.synchronize()
    except Exception as e:  # torch.compile's backends fail in many ways; say which
        if args.mode != "amp-compile":
            raise
        reason = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        print("pytorch_ref: torch.compile failed: %s: %s" % (type(e).__name__, reason), file=sys.stderr)
        sys.exit(3)
    used.append(device_used())
    whole_peak = torch.cuda.max_memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(args.steps):
        step()
    end.record()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    used.append(device_used())
    return {
        "framework": "pytorch",
        "model": args.model,
        "batch": args.batch,
        "mode": args.mode,
        "images_per_s": args.batch * args.steps / dt,
        "tokens_per_s": args.batch * args.steps / dt * gpt.SHAPES[args.model]["context"]
        if text else None,
        "step_ms": 1e3 * dt / args.steps,
        "device_ms": start.elapsed_time(end) / args.steps,
        "device_peak_bytes": max(whole_peak, torch.cuda.max_memory_allocated()),
        "steady_device_peak_bytes": torch.cuda.max_memory_allocated(),
        "device_used_peak_bytes": max(used),
        "host_peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "train_flops_per_image": flops,
        "steps": args.steps,
        "warmup": args.warmup,
        "tf32": tf32,
        "channels_last": amp and not text,
        "cudnn_benchmark": True,
        "compiled": args.mode == "amp-compile",
        "optimizer": ("adamw" if text else "sgd") + (" fused" if fused else " foreach"),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0),
    }


def main():
    p = arg_parser()
    args = p.parse_args()
    if args.batch < 1 or args.steps < 1 or args.warmup < 0:
        p.error("--batch and --steps must be >= 1, --warmup >= 0")
    if not torch.cuda.is_available():
        print("pytorch_ref: CUDA is not available", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(run(args)), flush=True)


if __name__ == "__main__":
    main()
