#!/usr/bin/env python3
"""PyTorch twins of mpdist's presets (mlp, cnn_bn, resnet20, gpt, vit), of the data they train
on, and of the transformers' checkpoints: for bench/cpu_speed.sh and
tests/integration/torch_load_gpt.sh.

Models (engine/presets.c; for gpt and vit the parameter names are the checkpoint's dataset
names, so a state_dict maps 1:1; tokens are the H*W positions of mpdist's NHWC activations):
  mlp       28x28x1 image flattened -> Linear + ReLU per --hidden width -> Linear (10).
  cnn_bn    conv3x3 32 (pad 1, no bias) - bn - relu - maxpool 2, conv3x3 64 - bn - relu -
            maxpool 2, flatten, fc 128 - relu - dropout 0.25 - fc 10.
  resnet20  bench/torch_cnn.py's (bench/pytorch_ref.py's), on one input channel.
  gpt  bytes -> wte (256, D) + wpe (T, D) -> drop -> L pre-LN blocks, causal -> ln_f ->
       logits = h wte^T (tied; untied: head.weight (256, D), head.bias). Per sample x (1, T, 1)
       holds the byte ids, labels are the next bytes; loss = mean cross-entropy over N*T tokens.
  vit  28x28x1 image -> patch: Conv2d kernel 7 stride 7 with bias (none when a checkpoint has
       no patch.bias) -> 16 tokens of D -> + pos (16, D) -> L pre-LN blocks, not causal ->
       ln_f -> mean over tokens -> head (10, D). With the conv stem (model.stem "conv"):
       stem.conv1..3 Conv2d 3x3 stride 2 pad 1 without bias (32, 64, 128 channels), each with
       stem.bn1..3 BatchNorm2d (eps 1e-5, momentum 0.1) and ReLU, to 4x4; patch is a 1x1 Conv2d.
  block  h = x + drop(attn.proj(attn(attn.qkv(ln1(x)))));  y = h + drop(mlp.proj(gelu_tanh(
         mlp.fc(ln2(h))))); qkv rows [q | k | v], head h uses columns h*dh .. (h+1)*dh - 1 of
         each; attention dropout on the probabilities; LayerNorm eps 1e-5.
  init   Linear and Conv2d PyTorch's default (U(+-1/sqrt(fan_in))), LayerNorm ones/zeros,
         wte/wpe/pos U(+-0.02*sqrt(3)).

Data, as mpdist reads it with one rank:
  text  (io/text.c) the regular files under data.path (a file, or a directory walked
        recursively, each directory's entries in byte order; hidden files, *.dat and symbolic
        links skipped), concatenated; the last floor(total * val_fraction) bytes are the
        validation split. Training windows: sample j of epoch e is bytes [j*T + off(e), ...
        + T + 1) (input T bytes, labels the T bytes after each), off(e) uniform in [0, T) from
        mpdist's xoshiro256** seeded with (train.seed ^ MP_TEXT_SALT, e); there are
        floor(train_len / T) - 1 of them. Validation window j is bytes [j*T, j*T + T + 1).
  idx   Fashion-MNIST (io/idx.c): the first train_limit / test_limit samples, pixels
        (p / 255 - mean) / std computed in double and rounded to FP32.
  order (io/sampler.c, src/train.c) each epoch a Fisher-Yates permutation driven by
        xoshiro256** seeded with (train.seed, epoch), batches of data.batch_size taken in order,
        the last one partial (data.drop_last = false). So PyTorch sees mpdist's batches in
        mpdist's order.

Commands (each prints one line of JSON):
  train  trains a fresh model with Adam (betas 0.9/0.999, eps 1e-8, no weight decay, constant
         lr) for --steps steps, timing windows of --every steps: samples_per_s and
         tokens_per_s are the median over the windows after the first (as bench/cpu_speed.sh
         reads mpdist's step records); final_loss is the last step's loss, test_loss the mean
         over the first --test-limit validation windows (or test images). PyTorch's CPU fast
         paths are options (--threads, --channels-last, --mkldnn, --compile), and --amp trains in
         mixed precision (autocast, the peer of mpdist's O1/O2); the JSON line also says
         what the process ran with: the threads, oneDNN, the CPU capability (AVX2, AVX512;
         ATEN_CPU_CAPABILITY in the environment picks another) and OPENBLAS_NUM_THREADS.
  eval   loads an mpdist checkpoint (or export: fp16 and bf16 values are read as FP32) and
         prints the mean loss and accuracy over the validation windows that mpdist eval uses,
         the data and model settings taken from the file's resolved config; --train-step S
         instead gives the loss of the batch mpdist trained on at step S (1-based, dropout off).
Usage:
  python3 bench/torch_models.py train --model gpt --batch 16 --steps 60 --threads 2
  python3 bench/torch_models.py eval --checkpoint runs/gpt/ckpt-00000100.h5
"""
import argparse
import gzip
import json
import math
import os
import re
import stat
import sys
import time

TEXT_SALT = 0x7E47D1A3C5F0B219  # io/dataset.h MP_TEXT_SALT
FMNIST = "/usr/share/datasets/fashion-mnist"
FORTUNES = "/usr/share/games/fortunes"
M64 = (1 << 64) - 1


def arg_parser():
    """The command line; built before torch is imported, so --help works without it."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train a fresh model and time it")
    t.add_argument("--model", choices=("mlp", "cnn_bn", "resnet20", "gpt", "vit"), default="gpt")
    t.add_argument("--hidden", default="512,256", help="mlp: the hidden widths")
    t.add_argument("--batch", type=int, default=16)
    t.add_argument("--steps", type=int, default=60)
    t.add_argument("--every", type=int, default=10, help="steps per timing window")
    t.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    t.add_argument("--channels-last", action="store_true",
                   help="cnn_bn, resnet20, vit: model and input in channels_last")
    t.add_argument("--mkldnn", choices=("on", "off"), default="on",
                   help="torch.backends.mkldnn.enabled (oneDNN for CPU convolutions)")
    t.add_argument("--amp", choices=("off", "bf16", "fp16"), default="off",
                   help="mixed precision: forward and loss under torch.autocast('cpu', dtype) "
                        "(PyTorch AMP's CPU path: bf16 matmuls and convolutions through oneDNN, "
                        "on AMX or AVX512-BF16 where the CPU has them); weights stay FP32. fp16 "
                        "trains with a GradScaler (dynamic loss scaling, as mpdist's O1/O2 fp16) "
                        "and needs a PyTorch whose CPU autocast and GradScaler take it (2.3 or "
                        "later); the JSON line gives the final loss_scale")
    t.add_argument("--compile", action="store_true",
                   help="train through torch.compile (PyTorch 2; compiled in the first, untimed window)")
    t.add_argument("--dim", type=int, default=128, help="model.dim, the token width")
    t.add_argument("--depth", type=int, default=4)
    t.add_argument("--heads", type=int, default=4)
    t.add_argument("--stem", choices=("patch", "conv"), default="patch", help="vit: model.stem")
    t.add_argument("--context", type=int, default=128, help="gpt: bytes per window (T)")
    t.add_argument("--attention", choices=("sdpa", "matrix"), default="sdpa",
                   help="gpt, vit: torch's scaled_dot_product_attention (where this torch has "
                   "it) or the explicit T x T softmax")
    t.add_argument("--dropout", type=float, default=None, help="default: gpt 0.1, vit 0")
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--seed", type=int, default=42, help="train.seed: batch order, offsets")
    t.add_argument("--data", default=None, help="default: gpt %s, vit %s" % (FORTUNES, FMNIST))
    t.add_argument("--val-fraction", type=float, default=0.1)
    t.add_argument("--test-limit", type=int, default=256, help="0: the whole split")
    t.add_argument("--mean", type=float, default=0.2860)
    t.add_argument("--std", type=float, default=0.3530)
    e = sub.add_parser("eval", help="load an mpdist checkpoint, evaluate it")
    e.add_argument("--checkpoint", required=True)
    e.add_argument("--data", default=None, help="default: the file's data.path")
    e.add_argument("--test-limit", type=int, default=None, help="default: the file's")
    e.add_argument("--batch", type=int, default=None, help="default: the file's batch size")
    e.add_argument("--train-step", type=int, default=0,
                   help="loss of the training batch of this step (1-based) instead")
    e.add_argument("--threads", type=int, default=2)
    return p


# ---- mpdist's generator and sampler (engine/rng.c, io/sampler.c), bit for bit ---------------

def _rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M64


class MpRng:
    """xoshiro256** seeded through splitmix64 from (seed, stream), as mp_rng_seed."""

    def __init__(self, seed, stream):
        x = (seed ^ ((stream * 0xD1342543DE82EF95 + 0x2545F4914F6CDD1D) & M64)) & M64
        self.s = []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M64
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
            self.s.append(z ^ (z >> 31))

    def next(self):
        s0, s1, s2, s3 = self.s
        result = (_rotl((s1 * 5) & M64, 7) * 9) & M64
        t = (s1 << 17) & M64
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = _rotl(s3, 45)
        self.s = [s0, s1, s2, s3]
        return result

    def below(self, n):
        limit = M64 - M64 % n
        while True:
            v = self.next()
            if v < limit:
                return v % n


def permutation(n, seed, epoch, shuffle=True):
    """The epoch's sample order (mp_sampler_set_epoch with one rank)."""
    perm = list(range(n))
    if shuffle and n > 1:
        r = MpRng(seed, epoch)
        for i in range(n - 1, 0, -1):
            j = r.below(i + 1)
            perm[i], perm[j] = perm[j], perm[i]
    return np.array(perm, dtype=np.int64)


def text_offset(seed, epoch, T):
    """mp_text_offset: where epoch `epoch`'s training windows start."""
    return MpRng(seed ^ TEXT_SALT, epoch).below(T)


def batches(n, batch, seed, steps, shuffle=True):
    """(epoch, indices) of mpdist's first `steps` steps on one rank (drop_last false)."""
    step, epoch = 0, 0
    while step < steps:
        perm = permutation(n, seed, epoch, shuffle)
        for b in range(0, n, batch):
            if step == steps:
                return
            yield epoch, perm[b:b + batch]
            step += 1
        epoch += 1


# ---- data ----------------------------------------------------------------------------------

def text_files(path):
    """The files io/text.c reads, in its order."""
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise SystemExit("torch_models: %s: no such file or directory" % path)
    out = []

    def walk(d):
        names = sorted(n for n in os.listdir(os.fsencode(d))
                       if not n.startswith(b".") and not n.endswith(b".dat"))
        for n in names:
            p = os.path.join(d, os.fsdecode(n))
            m = os.lstat(p).st_mode
            if stat.S_ISDIR(m):
                walk(p)
            elif stat.S_ISREG(m):
                out.append(p)
    walk(path)
    return out


class TextData:
    """mp_text_load's two splits of the corpus at `path` (windows of T + 1 bytes)."""

    def __init__(self, path, T, val_fraction=0.1, train_limit=0, test_limit=0):
        corpus = b"".join(open(f, "rb").read() for f in text_files(path))
        total = len(corpus)
        val_len = int(math.floor(total * val_fraction))
        train_len = total - val_len
        self.T = T
        self.ntrain = train_len // T - 1
        self.ntest = (val_len - 1) // T if val_len > 0 else 0
        if self.ntrain < 1 or self.ntest < 1:
            raise SystemExit("torch_models: %s: %d bytes are too few for context %d"
                             % (path, total, T))
        if 0 < train_limit < self.ntrain:
            self.ntrain = train_limit
        if 0 < test_limit < self.ntest:
            self.ntest = test_limit
        self.train = np.frombuffer(corpus, np.uint8, (self.ntrain + 1) * T)
        self.test = np.frombuffer(corpus, np.uint8, self.ntest * T + 1, train_len)

    def _windows(self, data, starts):
        ix = starts[:, None] + np.arange(self.T + 1)[None, :]
        w = data[ix].astype(np.int64)
        return w[:, :-1], w[:, 1:]

    def train_batch(self, idx, epoch, seed):
        off = text_offset(seed, epoch, self.T)
        return self._windows(self.train, np.asarray(idx, np.int64) * self.T + off)

    def test_batch(self, idx):
        return self._windows(self.test, np.asarray(idx, np.int64) * self.T)


def read_idx(path, magic):
    with gzip.open(path) if os.path.exists(path) else open(path[:-3], "rb") as f:
        raw = f.read()
    if int.from_bytes(raw[:4], "big") != magic:
        raise SystemExit("torch_models: %s: not an IDX file" % path)
    ndim = magic & 0xFF
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


class ImageData:
    """Fashion-MNIST as mp_idx_load and mp_dataset_batch give it: (N, 1, 28, 28) FP32."""

    def __init__(self, path, mean, std, train_limit=0, test_limit=0):
        table = ((np.arange(256, dtype=np.float64) / 255.0 - mean) / std).astype(np.float32)
        self.table = table

        def split(name, limit):
            x = read_idx(os.path.join(path, "%s-images-idx3-ubyte.gz" % name), 0x803)
            y = read_idx(os.path.join(path, "%s-labels-idx1-ubyte.gz" % name), 0x801)
            n = limit if 0 < limit < len(y) else len(y)
            return x[:n], y[:n].astype(np.int64)
        self.train_x, self.train_y = split("train", train_limit)
        self.test_x, self.test_y = split("t10k", test_limit)
        self.ntrain, self.ntest = len(self.train_y), len(self.test_y)

    def _batch(self, x, y, idx):
        return self.table[x[idx]][:, None, :, :], y[idx]

    def train_batch(self, idx, epoch, seed):
        return self._batch(self.train_x, self.train_y, idx)

    def test_batch(self, idx):
        return self._batch(self.test_x, self.test_y, idx)


# ---- resolved config text and checkpoint files ----------------------------------------------

def config_value(text, key, default=None):
    """KEY (group.name) of a resolved config (src/config_text.c: one `name = value;` a line)."""
    group, name = key.split(".", 1)
    g = re.search(r"^%s = \{\n(.*?)^\};" % re.escape(group), text, re.M | re.S)
    v = g and re.search(r"^\s*%s = (.*);\s*$" % re.escape(name), g.group(1), re.M)
    if not v:
        return default
    s = v.group(1).strip()
    if s.startswith('"'):
        return json.loads(s)
    if s in ("true", "false"):
        return s == "true"
    try:
        return int(s.rstrip("L"))
    except ValueError:
        return float(s)


def read_checkpoint(path):
    """(meta, arrays) of an mpdist checkpoint or export, every array as FP32 numpy, as the
    docs/checkpoints.md's h5py example reads them (fp16 comes as float16, bf16 as float32)."""
    import h5py
    with h5py.File(path, "r") as f:
        meta = {k: v.decode() if isinstance(v, bytes) else v for k, v in f["meta"].attrs.items()}
        arrays = {k: np.asarray(v).astype(np.float32)
                  for g in ("params", "buffers") if g in f for k, v in f[g].items()}
    return meta, arrays


if __name__ == "__main__":
    ARGS = arg_parser().parse_args()  # --help and usage errors answer here, without torch

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as exc:
    print("torch_models: cannot import numpy and torch (%s)" % exc, file=sys.stderr)
    sys.exit(1)


# ---- models ----------------------------------------------------------------------------------

class PosEmbedding(nn.Module):
    """A learned table added to every sample: weight (tokens, D)."""

    def __init__(self, tokens, d):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(tokens, d))


# How Attention computes: "sdpa" (torch's fused scaled_dot_product_attention, what a user writes
# today, where this torch has it: 2.0 and later) or "matrix" (softmax of the explicit T x T
# scores); set from --attention.
ATTENTION = "sdpa"


def use_sdpa():
    return ATTENTION == "sdpa" and hasattr(F, "scaled_dot_product_attention")


class Attention(nn.Module):
    def __init__(self, d, heads, causal, p):
        super().__init__()
        if d % heads:
            raise ValueError("width %d is not a multiple of heads %d" % (d, heads))
        self.heads, self.causal, self.p = heads, causal, p
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):  # (N, T, D)
        n, t, d = x.shape
        dh = d // self.heads
        q, k, v = (z.reshape(n, t, self.heads, dh).transpose(1, 2)
                   for z in self.qkv(x).split(d, dim=-1))
        if use_sdpa():
            o = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0,
                                               is_causal=self.causal)
            return self.proj(o.transpose(1, 2).reshape(n, t, d))
        s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(dh))
        if self.causal:
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            s = s.masked_fill(mask, float("-inf"))
        p = F.dropout(torch.softmax(s, dim=-1), self.p, self.training)
        return self.proj(torch.matmul(p, v).transpose(1, 2).reshape(n, t, d))


class Mlp(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, 4 * d)
        self.proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d, heads, causal, p):
        super().__init__()
        self.ln1 = nn.LayerNorm(d, eps=1e-5)
        self.attn = Attention(d, heads, causal, p)
        self.ln2 = nn.LayerNorm(d, eps=1e-5)
        self.mlp = Mlp(d)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        h = x + self.drop(self.attn(self.ln1(x)))
        return h + self.drop(self.mlp(self.ln2(h)))


def init_embeddings(model):
    """U(+-0.02 sqrt(3)) on the embedding tables; the rest keeps PyTorch's defaults."""
    a = 0.02 * math.sqrt(3.0)
    for name, p in model.named_parameters():
        if name in ("wte.weight", "wpe.weight", "pos.weight"):
            nn.init.uniform_(p, -a, a)


class Gpt(nn.Module):
    """mpdist's `gpt`: ids (N, T) int64 -> logits (N, T, 256)."""

    def __init__(self, context=128, width=128, depth=4, heads=4, dropout=0.1, tied=True):
        super().__init__()
        self.wte = nn.Embedding(256, width)
        self.wpe = PosEmbedding(context, width)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(width, heads, True, dropout) for _ in range(depth))
        self.ln_f = nn.LayerNorm(width, eps=1e-5)
        self.head = None if tied else nn.Linear(width, 256)
        init_embeddings(self)

    def forward(self, ids):
        h = self.drop(self.wte(ids) + self.wpe.weight[: ids.shape[1]])
        for b in self.blocks:
            h = b(h)
        h = self.ln_f(h)
        return F.linear(h, self.wte.weight) if self.head is None else self.head(h)


def image_model(name, hidden, dropout):
    """mlp, cnn_bn or resnet20 for 28x28x1 images and 10 classes (PyTorch's default init)."""
    if name == "mlp":
        layers, fan = [nn.Flatten()], 28 * 28
        for w in hidden:
            layers += [nn.Linear(fan, w), nn.ReLU()]
            fan = w
        return nn.Sequential(*layers, nn.Linear(fan, 10))
    if name == "cnn_bn":
        layers, c = [], 1
        for k in (32, 64):
            layers += [nn.Conv2d(c, k, 3, padding=1, bias=False), nn.BatchNorm2d(k), nn.ReLU(),
                       nn.MaxPool2d(2)]
            c = k
        return nn.Sequential(*layers, nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
                             nn.Dropout(0.25 if dropout is None else dropout), nn.Linear(128, 10))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_cnn
    return torch_cnn.build("resnet20", channels=1)


class Vit(nn.Module):
    """mpdist's `vit`: images (N, C, H, W) -> logits (N, classes)."""

    def __init__(self, image=28, channels=1, patch=7, width=128, depth=4, heads=4, dropout=0.0,
                 classes=10, patch_bias=True, stem=False):
        super().__init__()
        self.stem = None
        if stem:  # three 3x3 stride-2 convolutions: 28 -> 14 -> 7 -> 4
            self.stem, c = nn.ModuleDict(), channels
            for i, k in enumerate((32, 64, 128), 1):
                self.stem["conv%d" % i] = nn.Conv2d(c, k, 3, stride=2, padding=1, bias=False)
                self.stem["bn%d" % i] = nn.BatchNorm2d(k, eps=1e-5, momentum=0.1)
                c, image = k, (image - 1) // 2 + 1
            channels, patch = c, 1
        self.patch = nn.Conv2d(channels, width, patch, stride=patch, bias=patch_bias)
        self.pos = PosEmbedding((image // patch) ** 2, width)
        self.blocks = nn.ModuleList(Block(width, heads, False, dropout) for _ in range(depth))
        self.ln_f = nn.LayerNorm(width, eps=1e-5)
        self.head = nn.Linear(width, classes)
        init_embeddings(self)

    def forward(self, x):
        for i in range(1, 4) if self.stem is not None else ():
            x = F.relu(self.stem["bn%d" % i](self.stem["conv%d" % i](x)))
        h = self.patch(x).flatten(2).transpose(1, 2)  # (N, tokens, D), tokens in (h, w) order
        h = h + self.pos.weight
        for b in self.blocks:
            h = b(h)
        return self.head(self.ln_f(h).mean(dim=1))


def model_from_arrays(preset, arrays, heads, dropout=0.0):
    """The model whose parameters have these shapes (sizes read from the arrays)."""
    depth = len([k for k in arrays if re.fullmatch(r"blocks\.\d+\.ln1\.weight", k)])
    if preset == "gpt":
        context, width = arrays["wpe.weight"].shape
        return Gpt(context, width, depth, heads, dropout, tied="head.weight" not in arrays)
    if preset == "vit" and "stem.conv1.weight" in arrays:  # 28x28 images through the stem
        return Vit(28, arrays["stem.conv1.weight"].shape[3], 1, arrays["patch.weight"].shape[0],
                   depth, heads, dropout, arrays["head.weight"].shape[0], "patch.bias" in arrays,
                   stem=True)
    if preset == "vit":
        width, patch, _, channels = arrays["patch.weight"].shape
        side = int(round(math.sqrt(arrays["pos.weight"].shape[0]))) * patch
        return Vit(side, channels, patch, width, depth, heads, dropout,
                   arrays["head.weight"].shape[0], "patch.bias" in arrays)
    raise SystemExit("torch_models: model %r is not gpt or vit" % preset)


def load_arrays(model, arrays):
    """Loads mpdist's arrays into the model (strict: the names must match 1:1); convolution
    weights go from mpdist's (K, R, S, C) to PyTorch's (K, C, R, S)."""
    state = {k: torch.from_numpy(v) for k, v in arrays.items()}
    state = {k: v.permute(0, 3, 1, 2).contiguous() if v.dim() == 4 else v
             for k, v in state.items()}
    for k in model.state_dict():  # BatchNorm's step counter, which mpdist does not keep
        if k.endswith("num_batches_tracked"):
            state.setdefault(k, torch.tensor(0))
    model.load_state_dict(state, strict=True)


# ---- training and evaluation -----------------------------------------------------------------

def loss_of(model, x, y, reduction="mean", layout=None):
    x = torch.from_numpy(np.ascontiguousarray(x))
    if layout is not None and x.dim() == 4:
        x = x.contiguous(memory_format=layout)
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                           torch.from_numpy(np.ascontiguousarray(y)).reshape(-1),
                           reduction=reduction), logits


def evaluate(model, data, batch):
    """Mean loss and accuracy over data's test split, summed in FP64 (mp_train_evaluate)."""
    model.eval()
    total, correct, rows = 0.0, 0, 0
    with torch.no_grad():
        for s in range(0, data.ntest, batch):
            x, y = data.test_batch(np.arange(s, min(s + batch, data.ntest)))
            loss, logits = loss_of(model, x, y, "sum")
            total += float(loss.double())
            correct += int((logits.argmax(-1).numpy() == y).sum())
            rows += y.size
    return total / rows, correct / rows


def median(v):
    v = sorted(v)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2 if v else 0.0


def cpu_capability():
    """The vector ISA PyTorch's CPU kernels dispatch to ("AVX2", "AVX512", ...)."""
    get = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    if get:
        return get()
    m = re.search(r"CPU capability usage: (\S+)", torch.__config__.show())
    return m.group(1) if m else "unknown"


def train(a):
    global ATTENTION
    ATTENTION = a.attention
    torch.set_num_threads(a.threads)
    torch.backends.mkldnn.enabled = a.mkldnn == "on"
    torch.manual_seed(a.seed)
    if a.model == "gpt":
        data = TextData(a.data or FORTUNES, a.context, a.val_fraction, 0, a.test_limit)
        p = 0.1 if a.dropout is None else a.dropout
        model = Gpt(a.context, a.dim, a.depth, a.heads, p)
        tokens = a.context
    elif a.model == "vit":
        data = ImageData(a.data or FMNIST, a.mean, a.std, 0, a.test_limit)
        p = 0.0 if a.dropout is None else a.dropout
        model = Vit(width=a.dim, depth=a.depth, heads=a.heads, dropout=p, stem=a.stem == "conv")
        tokens = 1
    else:
        data = ImageData(a.data or FMNIST, a.mean, a.std, 0, a.test_limit)
        model = image_model(a.model, [int(w) for w in a.hidden.split(",") if w], a.dropout)
        tokens = 1
    layout = torch.contiguous_format
    if a.channels_last:
        if a.model not in ("cnn_bn", "resnet20", "vit"):
            raise SystemExit("torch_models: --channels-last is for cnn_bn, resnet20 and vit")
        layout = torch.channels_last
        model = model.to(memory_format=layout)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    fwd = model
    if a.compile:
        if not hasattr(torch, "compile"):
            raise SystemExit("torch_models: --compile needs PyTorch 2 (this is %s)" % torch.__version__)
        fwd = torch.compile(model)
    amp_dtype = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}[a.amp]
    # fp16's narrow range flushes small gradients to zero: PyTorch AMP trains fp16 only with a
    # GradScaler (bf16 has FP32's range and needs none). Older PyTorch's CPU autocast refuses
    # fp16 and has no CPU GradScaler (torch.amp.GradScaler came with 2.3).
    scaler = None
    if a.amp == "fp16":
        if not hasattr(torch.amp, "GradScaler"):
            arg_parser().error("--amp fp16 needs PyTorch 2.3 or later (a CPU GradScaler and fp16 "
                               "CPU autocast; this is %s): use --amp bf16" % torch.__version__)
        scaler = torch.amp.GradScaler("cpu")
    model.train()
    rates, samples, loss = [], 0, float("nan")
    t0 = time.perf_counter()
    for step, (epoch, idx) in enumerate(batches(data.ntrain, a.batch, a.seed, a.steps), 1):
        x, y = data.train_batch(idx, epoch, a.seed)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=amp_dtype, enabled=amp_dtype is not None):
            out, _ = loss_of(fwd, x, y, layout=layout)
        if scaler:
            scaler.scale(out).backward()
            scaler.step(opt)  # skipped where the scaled gradients overflowed
            scaler.update()
        else:
            out.backward()
            opt.step()
        loss = out.item()  # (float() of a tensor that needs grad warns in PyTorch 2.x)
        samples += len(idx)
        if step % a.every == 0 or step == a.steps:
            t1 = time.perf_counter()
            rates.append(samples / (t1 - t0))
            samples, t0 = 0, t1
    timed = rates[1:] if len(rates) > 1 else rates
    test_loss, acc = evaluate(model, data, a.batch)
    return {"framework": "pytorch", "model": a.model, "batch": a.batch, "steps": a.steps,
            "every": a.every, "threads": torch.get_num_threads(),
            "samples_per_s": median(timed), "tokens_per_s": median(timed) * tokens,
            "final_loss": loss, "test_loss": test_loss, "test_accuracy": acc,
            "test_samples": data.ntest, "torch": torch.__version__,
            "channels_last": a.channels_last, "compiled": a.compile, "amp": a.amp,
            "loss_scale": scaler.get_scale() if scaler else None,
            "attention": "sdpa" if use_sdpa() else "matrix",
            "mkldnn": torch.backends.mkldnn.enabled,
            "mkldnn_available": torch.backends.mkldnn.is_available(),
            "cpu_capability": cpu_capability(),
            "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "")}


def eval_checkpoint(a):
    torch.set_num_threads(a.threads)
    meta, arrays = read_checkpoint(a.checkpoint)
    cfg, preset = meta.get("config", ""), meta.get("model", "")
    heads = config_value(cfg, "model.heads")
    if heads is None:
        raise SystemExit("torch_models: %s: no model.heads in its config" % a.checkpoint)
    model = model_from_arrays(preset, arrays, int(heads))
    load_arrays(model, arrays)
    path = a.data or config_value(cfg, "data.path")
    test_limit = config_value(cfg, "data.test_limit", 0) if a.test_limit is None else a.test_limit
    batch = a.batch or config_value(cfg, "data.batch_size", 64)
    seed = config_value(cfg, "train.seed", 42)
    if preset == "gpt":
        T = model.wpe.weight.shape[0]
        data = TextData(path, T, config_value(cfg, "data.val_fraction", 0.1),
                        config_value(cfg, "data.train_limit", 0), test_limit)
    else:
        data = ImageData(path, config_value(cfg, "data.mean", 0.2860),
                         config_value(cfg, "data.std", 0.3530),
                         config_value(cfg, "data.train_limit", 0), test_limit)
    out = {"framework": "pytorch", "checkpoint": a.checkpoint, "model": preset,
           "step": int(meta.get("step", 0)), "params": len(arrays)}
    if a.train_step > 0:
        shuffle = config_value(cfg, "data.shuffle", True)
        for epoch, idx in batches(data.ntrain, batch, seed, a.train_step, shuffle):
            pass
        model.eval()
        with torch.no_grad():
            x, y = data.train_batch(idx, epoch, seed)
            out.update(train_step=a.train_step, train_loss=float(loss_of(model, x, y)[0]))
    else:
        loss, acc = evaluate(model, data, batch)
        out.update(test_loss=loss, test_accuracy=acc, test_samples=data.ntest)
    return out


def main():
    a = ARGS
    if a.cmd == "train":
        if min(a.batch, a.steps, a.every, a.threads) < 1:
            arg_parser().error("--batch, --steps, --every and --threads must be >= 1")
        out = train(a)
    else:
        out = eval_checkpoint(a)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
