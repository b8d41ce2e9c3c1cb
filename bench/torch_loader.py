#!/usr/bin/env python3
"""PyTorch's input pipeline on an image folder, for bench/loader.sh: torchvision's ImageFolder
(PIL decodes JPEG and PNG) with the ImageNet training transform (RandomResizedCrop, a horizontal
flip, ToTensor, Normalize; Grayscale first for one channel) and a DataLoader of batch 128,
shuffled, with WORKERS worker processes (0: in the main process). One warm-up pass of 2 batches,
then EPOCHS epochs timed with time.perf_counter; prints one line like bench_loader's:
"torch workers=W images=N seconds=S images_per_s=R".
Usage: torch_loader.py ROOT SIZE CHANNELS WORKERS [EPOCHS]"""
import sys
import time


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return
    if len(sys.argv) < 5:
        sys.exit("usage: torch_loader.py ROOT SIZE CHANNELS WORKERS [EPOCHS]")
    import torch
    import torchvision
    from torchvision import transforms as T
    root, size, channels, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    epochs = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    torch.set_num_threads(1)
    steps = [T.Grayscale(1)] if channels == 1 else [T.Lambda(lambda im: im.convert("RGB"))]
    mean, std = ([0.2860], [0.3530]) if channels == 1 else ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    steps += [T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(mean, std)]
    data = torchvision.datasets.ImageFolder(root + "/train", transform=T.Compose(steps))
    loader = torch.utils.data.DataLoader(data, batch_size=128, shuffle=True, num_workers=workers,
                                         persistent_workers=workers > 0)
    for i, _ in enumerate(loader):  # warm-up: workers started, files cached
        if i == 1:
            break
    t0, seen = time.perf_counter(), 0
    for _ in range(epochs):
        for x, _ in loader:
            seen += x.shape[0]
    s = time.perf_counter() - t0
    print(f"torch workers={workers} images={seen} seconds={s:.3f} images_per_s={seen / s:.1f}")


if __name__ == "__main__":
    main()
