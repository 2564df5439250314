"""The absorb policy from Python: a Client with a staging directory stages
files created under a directory with the policy (test/python sets it on
$SLUICE_ABSORB_DIR), so DCP checkpoints return once staged and drain in the
background, with the commit ordered after the shards' drain; the staging
limit makes writers wait instead of failing."""

import os
import pickle
import random
import tempfile
import unittest
import urllib.error
import urllib.request
import uuid
import warnings

import _env
import torch

import sluice
import sluice.dcp

warnings.filterwarnings("ignore", category=UserWarning)

ABSORB = os.environ.get("SLUICE_ABSORB_DIR", "")
INLINE_MAX = 16 << 10  # the server's default --inline-max


@unittest.skipUnless(ABSORB, "needs $SLUICE_ABSORB_DIR, a directory with the absorb policy (test/python sets it)")
class AbsorbTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.staging = self.tmp.name
        self.plain = _env.client()  # another client, without staging
        self.d = f"{ABSORB}/t-{uuid.uuid4().hex[:8]}"
        self.plain.mkdir(self.d)

    def tearDown(self):
        self.plain.close()
        self.tmp.cleanup()

    def test_dcp_staged(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64))
        sd = model.state_dict()
        dcp = sluice.dcp.checkpoint_module()
        with _env.client(staging_dir=self.staging) as c:
            dcp.save_state_dict(sd, sluice.dcp.StorageWriter(self.d + "/step1", c), no_dist=True)
            st = c.staging_stats()
            self.assertTrue(st["enabled"], st)
            sizes = [c.stat(f"{self.d}/step1/{n}").st_size
                     for n in c.listdir(self.d + "/step1") if n.endswith(".distcp")]
            shards = sum(n for n in sizes if n > INLINE_MAX)
            # Every shard above the inline limit went through the staging
            # area (smaller ones go to the metadata service in one request);
            # the commit was queued behind their drain.
            self.assertGreaterEqual(st["staged_bytes"], shards, st)
            self.assertGreaterEqual(st["renames_queued"], 1, st)
            # The listing shows the commit done (read-your-renames), as
            # lookups do, whether or not its rename is still queued.
            names = c.listdir(self.d + "/step1")
            self.assertIn(".metadata", names)
            self.assertNotIn(".metadata.tmp", names)
            c.wait_staged()
            st = c.staging_stats()
            self.assertEqual(st["held"], 0, st)
            self.assertEqual(st["drained_bytes"], st["staged_bytes"], st)
            self.assertEqual(st["rename_errors"], 0, st)
        # Another client loads it back: the bytes are on the targets.
        torch.manual_seed(1)
        other = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64)).state_dict()
        dcp.load_state_dict(other, sluice.dcp.StorageReader(self.d + "/step1", self.plain), no_dist=True)
        for k in sd:
            self.assertTrue(torch.equal(sd[k], other[k]), k)
        # The staging area is empty once the client closed.
        left = [f for _, _, fs in os.walk(self.staging) for f in fs if not f.startswith(".")]
        self.assertEqual([f for f in left if f.endswith(".dat")], [])

    def test_limit(self):
        files = [(f"{self.d}/f{i}", random.Random(i).randbytes(3 << 20)) for i in range(3)]
        with _env.client(staging_dir=self.staging, staging_max=1 << 20) as c:
            c.write_batch(files, inflight=1)
            st = c.staging_stats()
            self.assertEqual(st["limit"], 1 << 20, st)
            self.assertGreater(st["throttled"], 0, st)
            self.assertLessEqual(st["peak_held"], 1 << 20, st)
            c.wait_staged()
        for p, data in files:
            self.assertEqual(bytes(self.plain.read_bytes(p)), data, p)

    def test_save_then_load(self):
        # sluice.save commits with a rename that is queued behind the
        # staged file: a load by the same client waits for it and reads
        # the new version, never the old one nor no file at all.
        p = self.d + "/model.pt"
        with _env.client(staging_dir=self.staging) as c:
            for step in range(3):
                obj = {"w": torch.rand(1 << 18), "step": step}
                sluice.save(obj, p, client=c)
                self.assertEqual(sorted(c.listdir(self.d)), ["model.pt"])
                got = sluice.load(p, client=c)
                self.assertEqual(got["step"], step)
                self.assertTrue(torch.equal(got["w"], obj["w"]))

    def test_metrics(self):
        # The staging area as Prometheus text, and served over HTTP for a
        # scraper, as `sluice mount --http` serves a mount's.
        files = [(f"{self.d}/m{i}", random.Random(10 + i).randbytes(1 << 20)) for i in range(2)]
        with _env.client(staging_dir=self.staging) as c:
            c.write_batch(files)
            c.wait_staged()
            def value(text, name):
                for line in text.splitlines():
                    if line.startswith(name + " "):
                        return float(line.split()[1])
                self.fail(f"{name} not in {text!r}")
            text = c.staging_metrics()
            self.assertGreaterEqual(value(text, "sluice_absorb_staged_bytes_total"), 2 << 20, text)
            self.assertEqual(value(text, "sluice_absorb_held_bytes"), 0, text)
            host, port = c.serve_metrics()
            with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as r:
                self.assertEqual(r.status, 200)
                served = r.read().decode()
            self.assertEqual(value(served, "sluice_absorb_drained_bytes_total"), value(text, "sluice_absorb_drained_bytes_total"), served)
            with self.assertRaises(urllib.error.HTTPError):
                urllib.request.urlopen(f"http://{host}:{port}/other", timeout=10)
        # close() stopped the server.
        with self.assertRaises(OSError):
            urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=2)
        with _env.client() as c:
            self.assertEqual(c.staging_metrics(), "")  # no staging area

    def test_options(self):
        with self.assertRaises(ValueError):
            _env.client(staging_max=1 << 20)  # a limit without a directory
        c = _env.client()
        self.assertFalse(c.staging_stats()["enabled"])
        c.wait_staged()  # nothing staged: returns at once
        c.close()
        c = _env.client(staging_dir=self.staging, staging_max=8 << 20)
        c2 = pickle.loads(pickle.dumps(c))  # a DataLoader worker's copy keeps the options
        self.assertEqual((c2.staging_dir, c2.staging_max), (self.staging, 8 << 20))
        self.assertEqual(c2.staging_stats()["limit"], 8 << 20)
        c2.close()
        c.close()


if __name__ == "__main__":
    unittest.main()
