#!/usr/bin/env python3
"""An all-reduce's time as NCCL's own tuner predicts it (github:NVIDIA/nccl src/graph/tuning.cc
at 5067397c: its constants, lines 146-178; bandwidths and latencies, lines 300-420; the time of a
call, lines 615-660), for the ring and the tree in each of NCCL's protocols (LL, LL128, Simple):

  time = latency + bytes / algorithm bandwidth
  ring:  algorithm bandwidth = bus bandwidth x n / (2 (n-1)); bus bandwidth x 0.5 for LL and
         0.92 for LL128; latency = base + (2(n-1) - 2(N-1)) in-node steps + 2(N-1) network
         steps, an in-node step at least NCCL's network overhead (1 us on Intel CPUs, 3x for
         Simple) across nodes, and for Simple across nodes x1.9 on Volta, x1.4 later (the
         ring's "plateau", where bytes / (channels x n) >= 64: channels taken as one)
  tree:  algorithm bandwidth = bus bandwidth x 0.92 / 2, further /3.8 for LL and x120/128 for
         LL128 (7/9 in one node), times NCCL's correction factor by size; latency = base +
         2 ((g-1) in-node steps + floor(log2 N) network steps)

with n GPUs, g a node, N nodes, the bus bandwidth the node's: inside it the NVLink or PCIe
figure, across nodes the lesser of that and its NICs together. Left out: NCCL's per-channel caps
(llMaxBw and the like), the topology's extra network latency (latencyInter), NVLink SHARP
(NVLS, NVLSTree) and CollNet; so an H100 node's all-reduce here is the ring's (370 GB/s), not
NVLS's (480). LL128 is offered only over NVLink, as NCCL enables it by default. The cluster files'
bus bandwidths are nccl-tests' at large sizes, where NCCL already chose its protocol; the
protocol factors then apply to them again, so a large all-reduce here may be up to 8% slow.
"""
import math

PROTOCOLS = ("LL", "LL128", "Simple")
BASE_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
HW_US = {"nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
         "pcie": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7)},
         "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)}}
# treeCorrectionFactor: by protocol, for sizes of 64 B x 2^i (i = floor(log2(bytes / 64)) < 23)
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9))
NET_OVERHEAD_US = 1.0
PLATEAU = {"volta": 1.9}  # 1.4 for the others
LINKS, GPUS = ("nvlink", "pcie"), ("volta", "ampere", "hopper", "other")


def log2i(x):
    return x.bit_length() - 1 if x > 0 else -1


def time_s(algo, proto, nbytes, n, nodes, bus_gbs, intra_link, gpu):
    """Seconds for an all-reduce of nbytes over n GPUs on `nodes` nodes (n / nodes each) by
    algo ("ring" or "tree") in proto, at bus bandwidth bus_gbs (GB/s); 0 for one GPU."""
    if n == 1:
        return 0.0
    p = PROTOCOLS.index(proto)
    g = n // nodes
    intra = HW_US[intra_link][algo][p]
    inter = HW_US["net"]["tree" if g == 1 else algo][p]  # one GPU a node: the tree's network latency
    lat = BASE_US[algo][p]
    if algo == "ring":
        bw = bus_gbs * (0.5, 0.92, 1.0)[p] * n / (2 * (n - 1))
        if nodes > 1:
            intra = max(intra, NET_OVERHEAD_US * (3 if proto == "Simple" else 1))
        net_steps = 2 * (nodes - 1)
        lat += (2 * (n - 1) - net_steps) * intra + net_steps * inter
        if proto == "Simple" and nodes > 1 and nbytes / n >= 64:
            lat *= PLATEAU.get(gpu, 1.4)
    else:
        bw = bus_gbs * 0.92 * (1 / 3.8, 120 / 128 if nodes > 1 else 7 / 9, 1.0)[p] * 0.5
        i = log2i(int(nbytes) >> 6)
        if 0 <= i < 23:
            bw *= TREE_CORRECTION[p][i]
        lat += 2 * ((g - 1) * intra + log2i(nodes) * inter)
    return lat * 1e-6 + nbytes / (bw * 1e9)


def best_s(algo, nbytes, n, nodes, bus_gbs, intra_link, gpu):
    """(seconds, protocol) of algo's fastest protocol for nbytes; LL128 only where the GPUs of a
    node talk over NVLink (NCCL enables it by default up to PATH_NVB, tuning.cc lines 517-535)."""
    protos = PROTOCOLS if intra_link == "nvlink" else ("LL", "Simple")
    return min((time_s(algo, p, nbytes, n, nodes, bus_gbs, intra_link, gpu), p) for p in protos)


if __name__ == "__main__":  # a module of cluster/step_model.py: its description
    print(__doc__.strip())
