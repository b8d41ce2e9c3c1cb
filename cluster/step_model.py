#!/usr/bin/env python3
"""The scaling model of a data-parallel step (docs/scaling.md): one GPU's measured step and the
times its gradients become ready in backward, and a cluster's links, give the step on n GPUs.

Collectives. A cluster file names its links (NVLink or PCIe inside a node, NICs between nodes)
with bus bandwidths as nccl-tests reports them (measured, not nominal); an all-reduce's time per
algorithm and protocol is then NCCL's own tuning model (cluster/nccl_model.py), the bus
bandwidth inside a node the NVLink or PCIe figure and across nodes the lesser of that and the
node's NICs together (a ring crosses each node once per channel, and NCCL gives each NIC its
own channels). "hierarchical" (Horovod's) is a ring all-reduce inside each node, then one across
the nodes of the node's share on the GPU's share of its NICs. Each all-reduce takes the fastest
algorithm and protocol the cluster's library offers at its size, as NCCL's tuner does.
A cluster built with explicit latencies (the cluster box's fitted link, made-up test clusters)
uses alpha-beta steps instead, with n GPUs, g of them on each of N nodes:
- ring, one node:     base + 2 (n-1) alpha_in + 2 (n-1)/n S / B_in
- ring, N nodes:      base + 2 (n-N) alpha_in + 2 (N-1) alpha_net + 2 (n-1)/n S / min(B_in, B_node)
- tree:               base + 2 ((g-1) alpha_in + ceil(log2 N) alpha_net) + 2 S / min(B_in, B_node)
- hierarchical:       base + 2 (g-1) alpha_in + 2 (g-1)/g S / B_in
                      + 2 (N-1) alpha_net + 2 (N-1)/N S / B_node
With one GPU a node every step is a network one.

The step (weak scaling: each GPU keeps its batch). Buckets are planned from the gradients as
comm/buckets.c plans them (backward's order, one open bucket per group, the first closing at
first_bucket_bytes and the others at bucket_bytes, whole parameters) and start, as the engine
starts them, in the order they become ready, one at a time on one stream: bucket i starts at
max(ready_i, end of bucket i-1). The step is forward + max(backward, end of the last bucket) +
the found_inf agreement (an all-reduce of 4 bytes) + optimizer + other; with one GPU nothing
travels. Without overlap every bucket is ready when backward ends. With gradient accumulation
the micro-batches before the last add forward + backward + other each, and send nothing.
"""
import configparser, json, math, os, re, sys
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nccl_model  # noqa: E402


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
    base_us: float = 0.0     # explicit latencies: the fixed cost of a collective
    sources: list = field(default_factory=list)
    notes: str = ""
    intra_link: str = ""     # "nvlink" or "pcie": NCCL's model; "": explicit latencies (Link.us)
    gpu: str = "other"       # "volta", "ampere", "hopper": NCCL's ring plateau factor

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
    """(seconds, protocol) of an all-reduce of nbytes on n GPUs of cluster by algorithm algo
    ((0, "") for n = 1): NCCL's model in its fastest protocol, or the explicit alpha-beta steps."""
    if n == 1:
        return 0.0, ""
    if algo not in ALGORITHMS:
        raise ModelError(f"unknown algorithm '{algo}' (one of {', '.join(ALGORITHMS)})")
    nodes, g = layout(cluster, n)
    b_in, b_node = cluster.intra.gbs, cluster.node_gbs()
    bus = b_in if nodes == 1 else min(b_in, b_node) if g > 1 else b_node
    if cluster.intra_link:
        link, gpu = cluster.intra_link, cluster.gpu
        if algo != "hierarchical":
            return nccl_model.best_s(algo, nbytes, n, nodes, bus, link, gpu)
        inside = nccl_model.best_s("ring", nbytes, g, 1, b_in, link, gpu) if g > 1 else (0.0, "")
        between = nccl_model.best_s("ring", nbytes / g, nodes, nodes, b_node / g, link, gpu)
        return inside[0] + between[0], between[1]
    a_in, a_out = cluster.intra.us * 1e-6, cluster.inter.us * 1e-6
    base, bus = cluster.base_us * 1e-6, bus * 1e9
    if nodes == 1:  # every algorithm is the ring inside the node
        return base + 2 * (n - 1) * a_in + 2 * (n - 1) / n * nbytes / bus, ""
    if algo == "ring":
        return base + 2 * (n - nodes) * a_in + 2 * (nodes - 1) * a_out + 2 * (n - 1) / n * nbytes / bus, ""
    if algo == "tree":
        return base + 2 * ((g - 1) * a_in + math.ceil(math.log2(nodes)) * a_out) + 2 * nbytes / bus, ""
    inside = 2 * (g - 1) * a_in + 2 * (g - 1) / g * nbytes / (b_in * 1e9) if g > 1 else 0.0
    return base + inside + 2 * (nodes - 1) * a_out + 2 * (nodes - 1) / nodes * nbytes / (b_node * 1e9), ""


def best_allreduce(cluster, nbytes, n):
    """(seconds, "algorithm" or "algorithm/protocol") of the fastest of cluster's algorithms."""
    best = None
    for a in cluster.algorithms:
        t, proto = allreduce_s(cluster, a, nbytes, n)
        if best is None or t < best[0]:
            best = (t, f"{a}/{proto}" if proto else a)
    return best


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
    times = schedule([(b, 0.0) for b in sizes], 0.0, lambda b: 1e3 * allreduce_s(cluster, algo, b, n)[0],
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


CLUSTER_KEYS = {"name", "gpus_per_node", "intra_gbs", "intra_link", "nic_gbs", "nics_per_node", "gpu",
                "algorithms", "source", "notes"}


def load_cluster(path):
    """A cluster description file (cluster/clusters/*.cluster, an INI file with one [cluster]
    section: name, gpus_per_node, intra_gbs and intra_link (nvlink or pcie; with one GPU a node
    neither), nic_gbs, nics_per_node, gpu (volta, ampere, hopper or other), algorithms, source
    lines and notes). Latencies are NCCL's (cluster/nccl_model.py)."""
    cp = configparser.ConfigParser(inline_comment_prefixes=("#",), interpolation=None)
    try:
        if not cp.read(path, encoding="utf-8"):
            raise ModelError(f"{path}: cannot read the cluster file")
    except configparser.Error as e:
        raise ModelError(f"{path}: not a cluster file: {str(e).splitlines()[0]}") from None
    except UnicodeDecodeError:
        raise ModelError(f"{path}: not a cluster file: not UTF-8 text") from None
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
    link = sec.get("intra_link", "nvlink" if gpn == 1 else "")
    if link not in nccl_model.LINKS:
        raise ModelError(f"{path}: intra_link = {link}: give one of {', '.join(nccl_model.LINKS)}")
    gpu = sec.get("gpu", "other")
    if gpu not in nccl_model.GPUS:
        raise ModelError(f"{path}: gpu = {gpu}: give one of {', '.join(nccl_model.GPUS)}")
    intra = Link(_number(sec, "intra_gbs", path), 0.0) if gpn > 1 else Link(1.0, 0.0)
    sources = [s.strip() for s in sec.get("source", "").splitlines() if s.strip()]
    if not sources:
        raise ModelError(f"{path}: 'source' is missing: name where the figures come from")
    return Cluster(sec.get("name", path), gpn, intra, Link(_number(sec, "nic_gbs", path), 0.0),
                   _number(sec, "nics_per_node", path, int), algos, 0.0, sources,
                   " ".join(sec.get("notes", "").split()), link, gpu)


def load_profile(path):
    """A step profile (JSON; cluster/make_profile.py writes them from a run with log.profile):
    name, source, forward_ms, backward_ms, optimizer_ms, other_ms (a micro-batch's forward,
    backward and other; the step's optimizer), and params, the gradients in backward's order,
    each with bytes (on the wire), group and ready_ms (from backward's start)."""
    try:
        with open(path, encoding="utf-8") as f:
            p = json.load(f)
    except OSError as e:
        raise ModelError(f"{path}: cannot read the profile: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ModelError(f"{path}: not a profile: not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise ModelError(f"{path}: not JSON: {e.msg} at line {e.lineno}") from None
    if not isinstance(p, dict):
        raise ModelError(f"{path}: a profile is a JSON object")
    p.setdefault("other_ms", 0.0)
    for k in ("forward_ms", "backward_ms", "optimizer_ms", "other_ms"):
        v = p.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ModelError(f"{path}: '{k}' must be a number of milliseconds, 0 or more")
    params = p.get("params")
    if not isinstance(params, list) or not params:
        raise ModelError(f"{path}: 'params' must be a non-empty list of gradients")
    last = 0.0
    for i, q in enumerate(params):
        ok = isinstance(q, dict) and isinstance(q.get("bytes"), int) and q["bytes"] > 0 and \
            isinstance(q.get("ready_ms"), (int, float)) and math.isfinite(q["ready_ms"]) and \
            isinstance(q.get("group", ""), str)
        if not ok:
            raise ModelError(f"{path}: params[{i}] needs bytes (an integer above 0), ready_ms and a "
                             "group name (text)")
        if not last - 1e-9 <= q["ready_ms"] <= p["backward_ms"] + 1e-9:
            raise ModelError(f"{path}: params[{i}].ready_ms = {q['ready_ms']}: ready times must rise "
                             f"through backward (0 to backward_ms = {p['backward_ms']})")
        last = q["ready_ms"]
    p.setdefault("name", re.sub(r"\.json$", "", path.rsplit("/", 1)[-1]))
    return p


if __name__ == "__main__":  # a module of cluster/predict.py and cluster/published.py: its description
    print(__doc__.strip())
