#!/usr/bin/env python3
"""cluster/step_model.py on made-up profiles and clusters whose answers are worked out by hand
(no overlap, full overlap, queueing on one stream, bandwidth-bound, latency-bound, hierarchical,
the tree, the choice of the fastest, bucket planning as comm/buckets.c plans), and its bad
inputs. Run by tests/integration/scaling_predict.sh."""
import os, sys, tempfile, unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "cluster"))
import step_model as sm  # noqa: E402

MB = 2**20


def flat(gbs, us, algos=("ring",), gpn=1, nics=1, intra=(1.0, 0.0)):
    return sm.Cluster("made-up", gpn, sm.Link(*intra), sm.Link(gbs, us), nics, list(algos))


def profile(params, f=10.0, b=20.0, o=5.0, other=1.0):
    return {"forward_ms": f, "backward_ms": b, "optimizer_ms": o, "other_ms": other, "params": params}


class Collectives(unittest.TestCase):
    def test_ring_bandwidth_bound(self):
        c = flat(10.0, 0.0)  # 10 GB/s, no latency
        for n in (2, 4, 64):  # 2 (n-1)/n S / B
            self.assertAlmostEqual(sm.allreduce_s(c, "ring", 1e9, n)[0], 2 * (n - 1) / n * 0.1)

    def test_ring_latency_bound(self):
        c = flat(1e9, 5.0)  # no bandwidth term to speak of, 5 us a step
        self.assertAlmostEqual(sm.allreduce_s(c, "ring", 4, 8)[0], 14 * 5e-6, places=12)
        self.assertEqual(sm.allreduce_s(c, "ring", 4, 1), (0.0, ""))

    def test_one_node_uses_its_links(self):
        c = flat(1.0, 100.0, gpn=8, intra=(100.0, 2.0))
        # 8 GPUs in one node: the ring on NVLink whatever the algorithm list says
        for algo in sm.ALGORITHMS:
            self.assertAlmostEqual(sm.allreduce_s(c, algo, 1e9, 8)[0], 14 * 2e-6 + 14 / 8 * 1e9 / 100e9)

    def test_ring_across_nodes(self):
        # 2 nodes x 4 GPUs, 4 NICs of 10 GB/s (40 GB/s a node) under 100 GB/s inside: network-bound;
        # of the 14 steps 2 cross the nodes (5 us), 12 stay inside (1 us)
        c = flat(10.0, 5.0, gpn=4, nics=4, intra=(100.0, 1.0))
        self.assertAlmostEqual(sm.allreduce_s(c, "ring", 1e9, 8)[0], 22e-6 + 14 / 8 * 1e9 / 40e9)
        c.nics_per_node = 16  # 160 GB/s of NICs: NVLink is the bound now
        self.assertAlmostEqual(sm.allreduce_s(c, "ring", 1e9, 8)[0], 22e-6 + 14 / 8 * 1e9 / 100e9)
        c.base_us = 8.0  # a fixed cost per collective
        self.assertAlmostEqual(sm.allreduce_s(c, "ring", 1e9, 8)[0], 30e-6 + 14 / 8 * 1e9 / 100e9)

    def test_hierarchical(self):
        # 4 nodes x 2 GPUs: inside 2 (g-1) a + 2 (g-1)/g S/B_in = 2 us + 1e9/100e9;
        # between: 2 (N-1) a + 2 (N-1)/N S/B_node = 6 * 5 us + 1.5 * 1e9/20e9
        c = flat(10.0, 5.0, gpn=2, nics=2, intra=(100.0, 1.0))
        want = 2e-6 + 1e9 / 100e9 + 30e-6 + 1.5 * 1e9 / 20e9
        self.assertAlmostEqual(sm.allreduce_s(c, "hierarchical", 1e9, 8)[0], want)

    def test_tree(self):
        # 8 nodes x 4 GPUs: 2 (log2 8 a_out + 3 a_in) + 2 S / min(B_in, B_node)
        c = flat(10.0, 5.0, gpn=4, nics=1, intra=(100.0, 1.0))
        self.assertAlmostEqual(sm.allreduce_s(c, "tree", 1e6, 32)[0], 2 * (15e-6 + 3e-6) + 2e6 / 10e9)

    def test_fastest_by_size(self):
        c = flat(10.0, 5.0, ("ring", "tree"), gpn=4, nics=1, intra=(100.0, 1.0))
        self.assertEqual(sm.best_allreduce(c, 4, 256)[1], "tree")        # latency: log vs linear
        self.assertEqual(sm.best_allreduce(c, 1e10, 256)[1], "ring")     # bandwidth: 2(n-1)/n < 2

    def test_partial_nodes_refused(self):
        with self.assertRaises(sm.ModelError):
            sm.allreduce_s(flat(1, 0, gpn=8), "ring", 1, 12)


class NcclModel(unittest.TestCase):
    """NCCL's tuning model (cluster/nccl_model.py), worked by hand from tuning.cc's constants:
    4 nodes x 8 GPUs on NVLink (370 GB/s), 8 NICs of 47 GB/s (376 a node), Hopper."""
    c = sm.Cluster("nccl", 8, sm.Link(370.0, 0.0), sm.Link(47.0, 0.0), 8, ["ring", "tree"],
                   intra_link="nvlink", gpu="hopper")

    def test_small_message_tree_ll(self):
        # LL tree: base 6.8 + 2 ((8-1) x 0.6 NVLink + log2(4) x 5.0 network) = 35.2 us; 4 bytes at
        # 370 x 0.92 / 3.8 x 0.5 GB/s (correction factor 1.0 below 64 bytes) add next to nothing
        t = 35.2e-6 + 4 / (370e9 * 0.92 / 3.8 * 0.5)
        self.assertAlmostEqual(sm.nccl_model.time_s("tree", "LL", 4, 32, 4, 370.0, "nvlink", "hopper"), t, places=12)
        self.assertEqual(sm.best_allreduce(self.c, 4, 32)[1], "tree/LL")

    def test_large_message_ring_simple(self):
        # Simple ring: base 8.4 + (62 - 6) x 3.4 in the nodes + 6 x 14 across = 282.8 us, x1.4 (the
        # plateau, Hopper); 2 (n-1)/n S over min(370, 376) GB/s
        s = 256e6
        t = 282.8e-6 * 1.4 + 62 / 32 * s / 370e9
        self.assertAlmostEqual(sm.nccl_model.time_s("ring", "Simple", s, 32, 4, 370.0, "nvlink", "hopper"), t, places=12)
        # LL128 (bandwidth x 0.92, no plateau: 14 + 56 x 1.9 + 6 x 4.0 = 144.4 us) is faster still,
        # with NCCL's per-channel caps left out; the cluster's all-reduce takes it
        t128 = 144.4e-6 + 62 / 32 * s / (370e9 * 0.92)
        self.assertAlmostEqual(sm.allreduce_s(self.c, "ring", s, 32)[0], t128, places=12)
        self.assertEqual(sm.best_allreduce(self.c, s, 32)[1], "ring/LL128")

    def test_tree_correction(self):
        # 1 MiB: floor(log2(2^20 / 64)) = 14, Simple's factor 0.5: the tree at half its bandwidth
        lat = (8.4 + 2 * (7 * 4.0 + 2 * 14.0)) * 1e-6
        t = lat + 2**20 / (370e9 * 0.92 * 0.5 * 0.5)
        self.assertAlmostEqual(sm.nccl_model.time_s("tree", "Simple", 2**20, 32, 4, 370.0, "nvlink", "hopper"), t, places=12)

    def test_volta_plateau(self):
        a = sm.nccl_model.time_s("ring", "Simple", 64 * 32, 32, 4, 120.0, "nvlink", "volta")
        b = sm.nccl_model.time_s("ring", "Simple", 64 * 32, 32, 4, 120.0, "nvlink", "ampere")
        self.assertAlmostEqual((a - 64 * 62 / 120e9) / (b - 64 * 62 / 120e9), 1.9 / 1.4)


class Steps(unittest.TestCase):
    # two gradients of 1 MB each; 10 GB/s, no latency, 2 GPUs: each all-reduce 0.1 ms (2 (n-1)/n = 1),
    # and the found_inf agreement (4 bytes) 4e-7 ms
    c = flat(10.0, 0.0)
    agree = 4e-7
    two = [{"bytes": 10**6, "group": "h", "ready_ms": 5.0}, {"bytes": 10**6, "group": "h", "ready_ms": 15.0}]

    def test_one_gpu(self):
        s = sm.predict_step(profile(self.two), self.c, 1)
        self.assertEqual((s.step_ms, s.exposed_ms), (36.0, 0.0))

    def test_full_overlap(self):
        # caps of 0.5 MiB: two buckets, ready at 5 and 15 ms, each done 0.1 ms later, inside a
        # 20 ms backward: nothing exposed; comm from 5 to 15.1 ms
        s = sm.predict_step(profile(self.two), self.c, 2, bucket_mb=0.5, first_bucket_mb=0.5)
        self.assertAlmostEqual(s.step_ms, 36.0 + self.agree)
        self.assertAlmostEqual(s.exposed_ms, 0.0 + self.agree)
        self.assertAlmostEqual(s.comm_ms, 10.1)

    def test_no_overlap(self):
        s = sm.predict_step(profile(self.two), self.c, 2, bucket_mb=0.5, first_bucket_mb=0.5, overlap=False)
        self.assertAlmostEqual(s.step_ms, 36.2 + self.agree)
        self.assertAlmostEqual(s.exposed_ms, 0.2 + self.agree)

    def test_one_stream_queues(self):
        # 100 MB buckets take 10 ms each: the second is ready at 15 ms but waits for the first
        # (5-15 ms) and ends at 25, 5 ms after backward
        big = [dict(q, bytes=10**8) for q in self.two]
        s = sm.predict_step(profile(big), self.c, 2, bucket_mb=50, first_bucket_mb=50)
        self.assertAlmostEqual(s.exposed_ms, 5.0 + self.agree)
        late = [dict(big[0]), dict(big[1], ready_ms=18.0)]  # ready after the first ended: 18-28
        self.assertAlmostEqual(sm.predict_step(profile(late), self.c, 2, bucket_mb=50,
                                               first_bucket_mb=50).exposed_ms, 8.0 + self.agree)

    def test_agreement_latency(self):
        c = flat(1e9, 10.0)  # 10 us a step; 4 GPUs: the 4-byte agreement costs 6 steps
        s = sm.predict_step(profile(self.two), c, 4, bucket_mb=0.5, first_bucket_mb=0.5)
        self.assertAlmostEqual(s.exposed_ms, 0.06, places=6)

    def test_accumulation(self):
        # 4 micro-batches: 3 of forward + backward + other (31 ms) before the last one's step
        big = [dict(q, bytes=10**8) for q in self.two]
        s = sm.predict_step(profile(big), self.c, 2, bucket_mb=50, first_bucket_mb=50, accum=4)
        self.assertAlmostEqual(s.step_ms, 41.0 + self.agree + 3 * 31.0)
        self.assertAlmostEqual(sm.predict_step(profile(big), self.c, 1, accum=4).step_ms, 36.0 + 93.0)

    def test_efficiency(self):
        big = [dict(q, bytes=10**8) for q in self.two]
        self.assertAlmostEqual(sm.efficiency(profile(big), self.c, 2, bucket_mb=50,
                                             first_bucket_mb=50), 36.0 / (41.0 + self.agree))


class Buckets(unittest.TestCase):
    def test_plan_as_the_engine(self):
        g = lambda m, grp, r: {"bytes": int(m * MB), "group": grp, "ready_ms": r}
        # first buckets close at 0.6 MiB, the others at 25 MiB, per group, whole parameters:
        # "h": [0.4, 0.4] closes at 0.8 (ready 2), [1, 30] at 31 (ready 5), [2] is left open (6);
        # "f": [0.1] is left open (3). Started in the order backward completes them.
        ps = [g(0.4, "h", 1), g(0.4, "h", 2), g(0.1, "f", 3), g(1, "h", 4), g(30, "h", 5), g(2, "h", 6)]
        self.assertEqual(sm.plan_buckets(ps, 25 * MB, 0.6 * MB),
                         [(2 * int(0.4 * MB), 2), (int(0.1 * MB), 3), (31 * MB, 5), (2 * MB, 6)])


class Files(unittest.TestCase):
    def write(self, text, suffix):
        f = tempfile.NamedTemporaryFile("wb", suffix=suffix, delete=False)
        f.write(text.encode("utf-8", "surrogateescape"))
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    GOOD = ("[cluster]\nname = x\ngpus_per_node = 8\nintra_gbs = 300  # NVLink\nintra_link = nvlink\n"
            "nic_gbs = 45\nnics_per_node = 8\ngpu = hopper\nalgorithms = ring tree\n"
            "source = somewhere\n  and elsewhere\n")

    def test_cluster_file(self):
        c = sm.load_cluster(self.write(self.GOOD, ".cluster"))
        self.assertEqual((c.gpus_per_node, c.intra.gbs, c.node_gbs(), c.algorithms, c.intra_link, c.gpu,
                          len(c.sources)), (8, 300.0, 360.0, ["ring", "tree"], "nvlink", "hopper", 2))

    def test_bad_cluster_files(self):
        for text, says in [(self.GOOD.replace("nic_gbs = 45", "nic_gbs = -1"), "nic_gbs"),
                           (self.GOOD.replace("nic_gbs = 45", "nic_gbs = fast"), "not a number"),
                           (self.GOOD.replace("algorithms = ring tree", "algorithms = star"), "algorithms"),
                           (self.GOOD.replace("nic_gbs", "nic_gbps"), "unknown key"),
                           (self.GOOD.replace("intra_link = nvlink", "intra_link = qpi"), "intra_link"),
                           (self.GOOD.replace("gpu = hopper", "gpu = pascal"), "gpu"),
                           (self.GOOD.replace("source = somewhere\n  and elsewhere\n", ""), "source"),
                           ("nothing", "not a cluster file"), ("[a]\n[b]\n", "one section"),
                           ("\udcff", "UTF-8")]:
            with self.assertRaisesRegex(sm.ModelError, says):
                sm.load_cluster(self.write(text, ".cluster"))

    def test_bad_profiles(self):
        ok = '{"forward_ms": 1, "backward_ms": 2, "optimizer_ms": 0, "params": %s}'
        for text, says in [("{", "not JSON"), ("[]", "JSON object"),
                           (ok % "[]", "params"), (ok.replace('"backward_ms": 2', '"backward_ms": -2') % "[]",
                                                   "backward_ms"),
                           (ok % '[{"bytes": 0, "ready_ms": 1}]', "bytes"),
                           (ok % '[{"bytes": 4, "ready_ms": 1}, {"bytes": 4, "ready_ms": 0.5}]', "rise"),
                           (ok % '[{"bytes": 4, "ready_ms": 3}]', "rise"),
                           (ok.replace('"optimizer_ms": 0', '"optimizer_ms": 0, "other_ms": "x"') % "[]", "other_ms"),
                           (ok % '[{"bytes": 4, "ready_ms": 1, "group": []}]', "group"),
                           ("\udcff", "UTF-8")]:
            with self.assertRaisesRegex(sm.ModelError, says):
                sm.load_profile(self.write(text, ".json"))
        self.assertEqual(len(sm.load_profile(self.write(ok % '[{"bytes": 4, "ready_ms": 1}]', ".json"))["params"]), 1)


if __name__ == "__main__":
    unittest.main()
