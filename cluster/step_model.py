#!/usr/bin/env python3
"""The scaling model of a data-parallel step (docs/scaling.md): one GPU's measured step and the
times its gradients become ready in backward, and a cluster's links, give the step on n GPUs.

Collectives (alpha-beta: a step over a link costs its latency alpha plus bytes over its
bandwidth B). An all-reduce of S bytes on n GPUs, g of them on each of N nodes
(g = min(n, gpus_per_node)), with a fixed cost base per collective:
- ring, one node:     base + 2 (n-1) alpha_in + 2 (n-1)/n S / B_in
- ring, N nodes:      base + 2 (n-N) alpha_in + 2 (N-1) alpha_net + 2 (n-1)/n S / min(B_in, B_node):
                      of the ring's 2 (n-1) steps, 2 (N-1) cross a node boundary (NCCL's
                      model, src/graph/tuning.cc); the node's rings leave it through all its
                      NICs (B_node = nics x NIC bandwidth)
- tree (NCCL's double binary tree between nodes, a chain inside each):
                      base + 2 ((g-1) alpha_in + ceil(log2 N) alpha_net) + 2 S / min(B_in, B_node)
- hierarchical (reduce-scatter in the node, ring all-reduce of the node's S/g per GPU between
  nodes on the GPU's share of the NICs, all-gather in the node):
                      base + 2 (g-1) alpha_in + 2 (g-1)/g S / B_in
                      + 2 (N-1) alpha_net + 2 (N-1)/N S / B_node
With one GPU a node every step is a network one. Bandwidths are bus bandwidths as nccl-tests
reports them (what a ring step moves per second), so the cluster files give measured rather
than nominal figures. A cluster lists the algorithms its library chooses from; each all-reduce
takes the fastest of them at its size, as NCCL's tuner does.

The step (weak scaling: each GPU keeps its batch). Buckets are planned from the gradients as
comm/buckets.c plans them (backward's order, one open bucket per group, the first closing at
first_bucket_bytes and the others at bucket_bytes, whole parameters) and start, as the engine
starts them, in the order they become ready, one at a time on one stream: bucket i starts at
max(ready_i, end of bucket i-1). The step is forward + max(backward, end of the last bucket) +
the found_inf agreement (an all-reduce of 4 bytes) + optimizer + other; with one GPU nothing
travels. Without overlap every bucket is ready when backward ends. With gradient accumulation
the micro-batches before the last add forward + backward + other each, and send nothing.
"""
import configparser, json, math, re
from dataclasses import dataclass, field


class ModelError(Exception):
    """A bad cluster file, profile or argument: the message is one line for the user."""


@dataclass
class Link:
    gbs: float  # GB/s (1e9 bytes a second), bus bandwidth
    us: float   # latency a step, microseconds

    def time(self, nbytes):
        return self.us * 1e-6 + nbytes / (self.gbs * 1e9)


@dataclass
class Cluster:
    name: str
    gpus_per_node: int
    intra: Link              # between the GPUs of a node (unused with one GPU a node)
    inter: Link              # one NIC between nodes
    nics_per_node: int
    algorithms: list         # of "ring", "tree", "hierarchical"
    base_us: float = 0.0     # fixed cost of a collective (launch, NCCL's baseLat)
    sources: list = field(default_factory=list)
    notes: str = ""

    def node_gbs(self):
        return self.inter.gbs * self.nics_per_node


ALGORITHMS = ("ring", "tree", "hierarchical")


def layout(cluster, n):
    """(N nodes, g GPUs a node) for n GPUs: full nodes, or one node holding all n."""
    g = min(n, cluster.gpus_per_node)
    if n % g:
        raise ModelError(f"{n} GPUs do not fill nodes of {cluster.gpus_per_node} ({cluster.name})")
    return n // g, g


def allreduce_s(cluster, algo, nbytes, n):
    """Seconds for an all-reduce of nbytes on n GPUs of cluster by algorithm algo (0 for n = 1)."""
    if n == 1:
        return 0.0
    nodes, g = layout(cluster, n)
    a_in, a_out = cluster.intra.us * 1e-6, cluster.inter.us * 1e-6
    b_in, b_node = cluster.intra.gbs * 1e9, cluster.node_gbs() * 1e9
    base = cluster.base_us * 1e-6
    if nodes == 1:  # every algorithm is the ring inside the node
        return base + 2 * (n - 1) * a_in + 2 * (n - 1) / n * nbytes / b_in
    b_min = min(b_in, b_node) if g > 1 else b_node
    if algo == "ring":
        return base + 2 * (n - nodes) * a_in + 2 * (nodes - 1) * a_out + \
            2 * (n - 1) / n * nbytes / b_min
    if algo == "tree":
        return base + 2 * ((g - 1) * a_in + math.ceil(math.log2(nodes)) * a_out) + 2 * nbytes / b_min
    if algo == "hierarchical":
        inside = 2 * (g - 1) * a_in + 2 * (g - 1) / g * nbytes / b_in if g > 1 else 0.0
        return base + inside + 2 * (nodes - 1) * a_out + 2 * (nodes - 1) / nodes * nbytes / b_node
    raise ModelError(f"unknown algorithm '{algo}' (one of {', '.join(ALGORITHMS)})")


def best_allreduce(cluster, nbytes, n):
    """(seconds, algorithm) of the fastest of cluster's algorithms for nbytes on n GPUs."""
    return min((allreduce_s(cluster, a, nbytes, n), a) for a in cluster.algorithms)


def plan_buckets(params, bucket_bytes, first_bucket_bytes):
    """Buckets of params (dicts with bytes, group, ready_ms, in backward's order: the first ready
    first) as comm/buckets.c plans them: a list of (bytes, ready_ms) in start order."""
    open_, closed, out = {}, {}, []
    for j, p in enumerate(params):
        grp = p.get("group", "")
        b = open_.setdefault(grp, [0, -1])
        b[0] += p["bytes"]
        b[1] = j
        cap = bucket_bytes if closed.get(grp) else first_bucket_bytes
        if b[0] >= cap:
            out.append(tuple(b))
            closed[grp] = closed.get(grp, 0) + 1
            open_[grp] = [0, -1]
    out += [tuple(b) for b in open_.values() if b[1] >= 0]
    out.sort(key=lambda b: b[1])  # ready when backward passes its last parameter
    return [(nbytes, params[last]["ready_ms"]) for nbytes, last in out]


def schedule(buckets, backward_ms, comm_ms, overlap=True):
    """Start and end (ms from backward's start) of each bucket in buckets ((bytes, ready_ms) in
    start order), one at a time on one stream, comm_ms(bytes) each; without overlap all start
    after backward."""
    times, end = [], 0.0
    for nbytes, ready in buckets:
        start = max(ready if overlap else backward_ms, end)
        end = start + comm_ms(nbytes)
        times.append((start, end))
    return times


def fitted_link(name, alpha_s, beta_s_per_byte):
    """A cluster of one-GPU nodes on a link fitted as t = alpha + beta bytes a ring step (the
    cluster box's calibration, cluster/scaling_box.py), with the ring and no fixed cost."""
    return Cluster(name, 1, Link(1.0, 0.0), Link(1e-9 / beta_s_per_byte, alpha_s * 1e6), 1, ["ring"])


def in_turn_s(cluster, sizes, n, algo="ring"):
    """Seconds from the first bucket's start to the last one's end for buckets of these sizes,
    all ready at once, one after another on the stream."""
    times = schedule([(b, 0.0) for b in sizes], 0.0, lambda b: 1e3 * allreduce_s(cluster, algo, b, n),
                     overlap=False)
    return (times[-1][1] - times[0][0]) / 1e3 if times else 0.0


@dataclass
class Step:
    step_ms: float
    exposed_ms: float  # communication not hidden behind backward, agreement included
    comm_ms: float     # first bucket's start to the last one's end
    algorithms: dict   # algorithm -> buckets that used it


def predict_step(profile, cluster, n, bucket_mb=25.0, first_bucket_mb=1.0, overlap=True, accum=1):
    """The step of profile (a dict, see load_profile) on n GPUs of cluster; with accum
    micro-batches a step (train.accum_steps), the earlier ones forward and backward only (other_ms
    each), the last one's backward sending the buckets."""
    f, b, other = profile["forward_ms"], profile["backward_ms"], profile.get("other_ms", 0.0)
    rest = profile["optimizer_ms"] + other + (accum - 1) * (f + b + other)
    if n == 1:
        return Step(f + b + rest, 0.0, 0.0, {})
    used = {}

    def comm_ms(nbytes):
        t, algo = best_allreduce(cluster, nbytes, n)
        used[algo] = used.get(algo, 0) + 1
        return 1e3 * t

    buckets = plan_buckets(profile["params"], bucket_mb * 2**20, first_bucket_mb * 2**20)
    times = schedule(buckets, b, comm_ms, overlap)
    done = max(b, times[-1][1]) if times else b
    agree = 1e3 * best_allreduce(cluster, 4, n)[0]
    span = times[-1][1] - times[0][0] if times else 0.0
    return Step(f + done + agree + rest, done - b + agree, span, used)


def efficiency(profile, cluster, n, **kw):
    """Weak-scaling efficiency on n GPUs: the one-GPU step over the n-GPU step."""
    return predict_step(profile, cluster, 1, **kw).step_ms / predict_step(profile, cluster, n, **kw).step_ms


def _number(sec, key, path, kind=float, low=0.0, strict=True):
    text = sec.get(key)
    if text is None:
        raise ModelError(f"{path}: '{key}' is missing")
    try:
        v = kind(text)
    except ValueError:
        raise ModelError(f"{path}: {key} = {text}: not a number") from None
    if not math.isfinite(v) or v < low or (strict and v == low):
        raise ModelError(f"{path}: {key} = {text}: must be {'above' if strict else 'at least'} {low:g}")
    return v


CLUSTER_KEYS = {"name", "gpus_per_node", "intra_gbs", "intra_us", "nic_gbs", "inter_us",
                "nics_per_node", "algorithms", "base_us", "source", "notes"}


def load_cluster(path):
    """A cluster description file (cluster/clusters/*.cluster, an INI file with one [cluster]
    section: name, gpus_per_node, intra_gbs, intra_us, nic_gbs, inter_us, nics_per_node,
    algorithms, base_us (optional, 0), source lines and notes)."""
    cp = configparser.ConfigParser(inline_comment_prefixes=("#",), interpolation=None)
    try:
        if not cp.read(path):
            raise ModelError(f"{path}: cannot read the cluster file")
    except configparser.Error as e:
        raise ModelError(f"{path}: not a cluster file: {str(e).splitlines()[0]}") from None
    if cp.sections() != ["cluster"]:
        raise ModelError(f"{path}: a cluster file has one section, [cluster]")
    sec = cp["cluster"]
    unknown = sorted(set(sec) - CLUSTER_KEYS)
    if unknown:
        raise ModelError(f"{path}: unknown key '{unknown[0]}' (keys: {', '.join(sorted(CLUSTER_KEYS))})")
    algos = sec.get("algorithms", "").split()
    bad = [a for a in algos if a not in ALGORITHMS]
    if not algos or bad:
        raise ModelError(f"{path}: algorithms = {sec.get('algorithms', '')}: give one or more of "
                         f"{', '.join(ALGORITHMS)}")
    gpn = _number(sec, "gpus_per_node", path, int)
    intra = Link(_number(sec, "intra_gbs", path), _number(sec, "intra_us", path, low=0, strict=False)) \
        if gpn > 1 else Link(1.0, 0.0)
    sources = [s.strip() for s in sec.get("source", "").splitlines() if s.strip()]
    if not sources:
        raise ModelError(f"{path}: 'source' is missing: name where the figures come from")
    return Cluster(sec.get("name", path), gpn, intra,
                   Link(_number(sec, "nic_gbs", path), _number(sec, "inter_us", path, low=0, strict=False)),
                   _number(sec, "nics_per_node", path, int), algos,
                   _number(sec, "base_us", path, low=0, strict=False) if "base_us" in sec else 0.0,
                   sources, " ".join(sec.get("notes", "").split()))


def load_profile(path):
    """A step profile (JSON; bench/scaling_profile.py writes them from a run with log.profile):
    name, source, forward_ms, backward_ms, optimizer_ms, other_ms, and params, the gradients in
    backward's order, each with bytes (on the wire), group and ready_ms (from backward's start)."""
    try:
        with open(path) as f:
            p = json.load(f)
    except OSError as e:
        raise ModelError(f"{path}: cannot read the profile: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ModelError(f"{path}: not JSON: {e.msg} at line {e.lineno}") from None
    if not isinstance(p, dict):
        raise ModelError(f"{path}: a profile is a JSON object")
    for k in ("forward_ms", "backward_ms", "optimizer_ms"):
        v = p.get(k)
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ModelError(f"{path}: '{k}' must be a number of milliseconds, 0 or more")
    params = p.get("params")
    if not isinstance(params, list) or not params:
        raise ModelError(f"{path}: 'params' must be a non-empty list of gradients")
    last = 0.0
    for i, q in enumerate(params):
        ok = isinstance(q, dict) and isinstance(q.get("bytes"), int) and q["bytes"] > 0 and \
            isinstance(q.get("ready_ms"), (int, float)) and math.isfinite(q["ready_ms"])
        if not ok:
            raise ModelError(f"{path}: params[{i}] needs bytes (an integer above 0) and ready_ms")
        if not last - 1e-9 <= q["ready_ms"] <= p["backward_ms"] + 1e-9:
            raise ModelError(f"{path}: params[{i}].ready_ms = {q['ready_ms']}: ready times must rise "
                             f"through backward (0 to backward_ms = {p['backward_ms']})")
        last = q["ready_ms"]
    p.setdefault("name", re.sub(r"\.json$", "", path.rsplit("/", 1)[-1]))
    return p


if __name__ == "__main__":  # a module of cluster/predict.py and cluster/published.py: its description
    print(__doc__.strip())
