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
            self.assertAlmostEqual(sm.allreduce_s(c, "ring", 1e9, n), 2 * (n - 1) / n * 0.1)

    def test_ring_latency_bound(self):
        c = flat(1e9, 5.0)  # no bandwidth term to speak of, 5 us a step
        self.assertAlmostEqual(sm.allreduce_s(c, "ring", 4, 8), 14 * 5e-6, places=12)
        self.assertEqual(sm.allreduce_s(c, "ring", 4, 1), 0.0)

    def test_one_node_uses_its_links(self):
        c = flat(1.0, 100.0, gpn=8, intra=(100.0, 2.0))
        # 8 GPUs in one node: the ring on NVLink whatever the algorithm list says
        for algo in sm.ALGORITHMS:
            self.assertAlmostEqual(sm.allreduce_s(c, algo, 1e9, 8), 14 * 2e-6 + 14 / 8 * 1e9 / 100e9)

    def test_ring_across_nodes(self):
        # 2 nodes x 4 GPUs, 4 NICs of 10 GB/s (40 GB/s a node) under 100 GB/s inside: network-bound;
        # of the 14 steps 2 cross the nodes (5 us), 12 stay inside (1 us)
        c = flat(10.0, 5.0, gpn=4, nics=4, intra=(100.0, 1.0))
        self.assertAlmostEqual(sm.allreduce_s(c, "ring", 1e9, 8), 22e-6 + 14 / 8 * 1e9 / 40e9)
        c.nics_per_node = 16  # 160 GB/s of NICs: NVLink is the bound now
        self.assertAlmostEqual(sm.allreduce_s(c, "ring", 1e9, 8), 22e-6 + 14 / 8 * 1e9 / 100e9)
        c.base_us = 8.0  # a fixed cost per collective
        self.assertAlmostEqual(sm.allreduce_s(c, "ring", 1e9, 8), 30e-6 + 14 / 8 * 1e9 / 100e9)

    def test_hierarchical(self):
        # 4 nodes x 2 GPUs: inside 2 (g-1) a + 2 (g-1)/g S/B_in = 2 us + 1e9/100e9;
        # between: 2 (N-1) a + 2 (N-1)/N S/B_node = 6 * 5 us + 1.5 * 1e9/20e9
        c = flat(10.0, 5.0, gpn=2, nics=2, intra=(100.0, 1.0))
        want = 2e-6 + 1e9 / 100e9 + 30e-6 + 1.5 * 1e9 / 20e9
        self.assertAlmostEqual(sm.allreduce_s(c, "hierarchical", 1e9, 8), want)

    def test_tree(self):
        # 8 nodes x 4 GPUs: 2 (log2 8 a_out + 3 a_in) + 2 S / min(B_in, B_node)
        c = flat(10.0, 5.0, gpn=4, nics=1, intra=(100.0, 1.0))
        self.assertAlmostEqual(sm.allreduce_s(c, "tree", 1e6, 32), 2 * (15e-6 + 3e-6) + 2e6 / 10e9)

    def test_fastest_by_size(self):
        c = flat(10.0, 5.0, ("ring", "tree"), gpn=4, nics=1, intra=(100.0, 1.0))
        self.assertEqual(sm.best_allreduce(c, 4, 256)[1], "tree")        # latency: log vs linear
        self.assertEqual(sm.best_allreduce(c, 1e10, 256)[1], "ring")     # bandwidth: 2(n-1)/n < 2

    def test_partial_nodes_refused(self):
        with self.assertRaises(sm.ModelError):
            sm.allreduce_s(flat(1, 0, gpn=8), "ring", 1, 12)


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
        f = tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False)
        f.write(text)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    GOOD = ("[cluster]\nname = x\ngpus_per_node = 8\nintra_gbs = 300  # NVLink\nintra_us = 2\n"
            "nic_gbs = 45\ninter_us = 5\nnics_per_node = 8\nalgorithms = ring tree\nbase_us = 8\n"
            "source = somewhere\n  and elsewhere\n")

    def test_cluster_file(self):
        c = sm.load_cluster(self.write(self.GOOD, ".cluster"))
        self.assertEqual((c.gpus_per_node, c.intra.gbs, c.node_gbs(), c.algorithms, c.base_us, len(c.sources)),
                         (8, 300.0, 360.0, ["ring", "tree"], 8.0, 2))

    def test_bad_cluster_files(self):
        for text, says in [(self.GOOD.replace("nic_gbs = 45", "nic_gbs = -1"), "nic_gbs"),
                           (self.GOOD.replace("nic_gbs = 45", "nic_gbs = fast"), "not a number"),
                           (self.GOOD.replace("algorithms = ring tree", "algorithms = star"), "algorithms"),
                           (self.GOOD.replace("inter_us", "inter_usec"), "unknown key"),
                           (self.GOOD.replace("source = somewhere\n  and elsewhere\n", ""), "source"),
                           ("nothing", "not a cluster file"), ("[a]\n[b]\n", "one section")]:
            with self.assertRaisesRegex(sm.ModelError, says):
                sm.load_cluster(self.write(text, ".cluster"))

    def test_bad_profiles(self):
        ok = '{"forward_ms": 1, "backward_ms": 2, "optimizer_ms": 0, "params": %s}'
        for text, says in [("{", "not JSON"), ("[]", "JSON object"),
                           (ok % "[]", "params"), (ok.replace('"backward_ms": 2', '"backward_ms": -2') % "[]",
                                                   "backward_ms"),
                           (ok % '[{"bytes": 0, "ready_ms": 1}]', "bytes"),
                           (ok % '[{"bytes": 4, "ready_ms": 1}, {"bytes": 4, "ready_ms": 0.5}]', "rise"),
                           (ok % '[{"bytes": 4, "ready_ms": 3}]', "rise")]:
            with self.assertRaisesRegex(sm.ModelError, says):
                sm.load_profile(self.write(text, ".json"))
        self.assertEqual(len(sm.load_profile(self.write(ok % '[{"bytes": 4, "ready_ms": 1}]', ".json"))["params"]), 1)


if __name__ == "__main__":
    unittest.main()
