"""PyTorch on Sluice against a real server: DataLoaders with 0, 2 and 4
workers read every sample exactly once per epoch with the bytes written,
tar shards likewise, save/load and torch.distributed.checkpoint round trips
with equality checks."""

import io
import os
import pickle
import random
import tarfile
import tempfile
import unittest
import warnings

import _env
import torch
from torch.utils.data import DataLoader

import sluice
import sluice.dcp
from sluice.data import FileDataset, StorageOrderSampler, TarDataset, as_tensor

warnings.filterwarnings("ignore", category=UserWarning)


def rand(n, seed):
    return random.Random(seed).randbytes(n)


def keep(batch):
    return batch


class DatasetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = _env.client()
        cls.d = _env.fresh_dir(cls.c, "ds")
        cls.c.mkdir(cls.d + "/train/a", parents=True)
        cls.c.mkdir(cls.d + "/train/b", parents=True)
        cls.files = {}
        for i in range(200):
            p = f"{cls.d}/train/{'ab'[i % 2]}/{i:04d}.bin"
            cls.files[p] = rand(random.Random(i).randint(100, 20_000), i)
        cls.c.write_batch(list(cls.files.items()))
        cls.c.write_bytes(cls.d + "/train/README", b"not a sample")

    def epoch(self, loader):
        seen = {}
        for batch in loader:
            for path, data in batch:
                self.assertNotIn(path, seen, "a sample read twice in one epoch")
                seen[path] = bytes(data)
        return seen

    def test_dataloader_workers(self):
        ds = FileDataset(self.d + "/train", client=self.c, suffixes=[".bin"], with_path=True)
        self.assertEqual(len(ds), 200)
        self.assertEqual(ds.sizes[:3], [len(self.files[p]) for p in sorted(self.files)[:3]])
        for workers in (0, 2, 4):
            with self.subTest(workers=workers):
                dl = DataLoader(ds, batch_size=16, shuffle=True, num_workers=workers, collate_fn=keep)
                for _ in range(2):  # the workers of the second epoch start afresh too
                    self.assertEqual(self.epoch(dl), self.files)

    def test_spawned_workers(self):
        # spawn pickles the dataset: the copy connects in the worker.
        ds = FileDataset(paths=sorted(self.files)[:40], server=_env.SERVER, with_path=True)
        dl = DataLoader(ds, batch_size=8, num_workers=2, collate_fn=keep, multiprocessing_context="spawn")
        self.assertEqual(self.epoch(dl), {p: self.files[p] for p in sorted(self.files)[:40]})

    def test_tensors_and_sampler(self):
        ds = FileDataset(paths=sorted(self.files), client=self.c, output="memoryview", transform=as_tensor)
        t = ds[5]
        self.assertEqual(t.dtype, torch.uint8)
        self.assertEqual(t.numpy().tobytes(), self.files[sorted(self.files)[5]])
        s = StorageOrderSampler(ds, block_size=32, seed=1)
        order1 = list(s)
        self.assertEqual(sorted(order1), list(range(200)))
        s.set_epoch(1)
        self.assertNotEqual(list(s), order1)
        plain = list(StorageOrderSampler(ds, shuffle=False))
        self.assertEqual(plain, sorted(range(200), key=lambda i: (ds.files.chains[i], ds.files.inos[i])))
        dl = DataLoader(ds, batch_size=10, sampler=s, num_workers=2, collate_fn=keep)
        got = [x.numpy().tobytes() for b in dl for x in b]
        self.assertEqual(sorted(got), sorted(self.files.values()))
        # Tensors read into shared memory by the workers.
        ts = FileDataset(paths=sorted(self.files), client=self.c, output="tensor", with_path=True)
        for workers in (0, 2):
            got = {p: t.numpy().tobytes() for b in DataLoader(ts, batch_size=16, num_workers=workers, collate_fn=keep)
                   for p, t in b}
            self.assertEqual(got, self.files)
        mv = FileDataset(paths=sorted(self.files)[:3], client=self.c, output="memoryview")[1]
        self.assertEqual(mv.tobytes(), self.files[sorted(self.files)[1]])

    def test_tar_shards(self):
        c = self.c
        d = _env.fresh_dir(c, "tar")
        want = {}
        shards = []
        for s in range(8):
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tf:
                for i in range(25):
                    key = f"s{s}/{i:03d}"
                    img, cls = rand(random.Random(s * 100 + i).randint(1, 50_000), s * 100 + i), str(i % 10).encode()
                    want[key] = (img, cls)
                    for ext, data in (("jpg", img), ("cls", cls)):
                        ti = tarfile.TarInfo(f"{key}.{ext}")
                        ti.size = len(data)
                        tf.addfile(ti, io.BytesIO(data))
            shards.append(f"{d}/shard-{s:02d}.tar")
            c.write_bytes(shards[-1], buf.getvalue())
        ds = TarDataset(shards, client=c, shuffle_shards=True)
        for workers in (0, 2):
            with self.subTest(workers=workers):
                got = {}
                for x in DataLoader(ds, batch_size=None, num_workers=workers):
                    self.assertNotIn(x["__key__"], got)
                    got[x["__key__"]] = (x["jpg"], x["cls"])
                self.assertEqual(got, want)
        # Two ranks split the shards between them.
        r0 = {x["__key__"] for x in TarDataset(shards, client=c, rank=0, world_size=2)}
        r1 = {x["__key__"] for x in TarDataset(shards, client=c, rank=1, world_size=2)}
        self.assertEqual(len(r0), 100)
        self.assertEqual(r0 | r1, set(want))
        self.assertEqual(r0 & r1, set())


class CheckpointTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = _env.client()

    def setUp(self):
        self.d = _env.fresh_dir(self.c, "ckpt")
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
        self.opt = torch.optim.Adam(self.model.parameters())
        self.model(torch.randn(4, 128)).sum().backward()
        self.opt.step()

    def fresh(self):
        torch.manual_seed(1)
        return torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))

    def assertStateEqual(self, a, b):
        self.assertEqual(set(a), set(b))
        for k in a:
            self.assertTrue(torch.equal(a[k], b[k]), k)

    def test_save_load(self):
        obj = {"model": self.model.state_dict(), "opt": self.opt.state_dict(), "step": 7}
        p = self.d + "/step7.pt"
        sluice.save(obj, p, client=self.c)
        self.assertEqual(self.c.listdir(self.d), ["step7.pt"])  # no temporary left
        got = sluice.load(p, client=self.c)
        self.assertStateEqual(got["model"], obj["model"])
        self.assertEqual(got["step"], 7)
        self.assertEqual(got["opt"]["state"][0]["step"], obj["opt"]["state"][0]["step"])
        # Saving again replaces the file whole; a URL names the server.
        sluice.save({"step": 8}, f"sluice://{_env.SERVER}{p}")
        self.assertEqual(sluice.load(f"sluice://{_env.SERVER}{p}")["step"], 8)
        # A local torch.load of the same bytes agrees (the format is torch.save's).
        self.assertEqual(torch.load(io.BytesIO(bytes(self.c.read_bytes(p))))["step"], 8)

    def test_dcp_round_trip(self):
        dcp = sluice.dcp.checkpoint_module()
        sd = self.model.state_dict()
        for single in (False, True):
            with self.subTest(single_file_per_rank=single):
                path = f"{self.d}/dcp-{int(single)}"
                dcp.save_state_dict(sd, sluice.dcp.StorageWriter(path, self.c, single_file_per_rank=single),
                                    no_dist=True)
                names = self.c.listdir(path)
                self.assertIn(".metadata", names)
                self.assertNotIn(".metadata.tmp", names)
                self.assertEqual(len([n for n in names if n.endswith(".distcp")]), 1 if single else len(sd))
                m2 = self.fresh()
                sd2 = m2.state_dict()
                self.assertFalse(all(torch.equal(sd[k], sd2[k]) for k in sd))
                dcp.load_state_dict(sd2, sluice.dcp.StorageReader(path, self.c), no_dist=True)
                self.assertStateEqual(sd2, sd)

    def test_dcp_reads_torch_filesystem_layout(self):
        # A checkpoint written by torch's own FileSystemWriter (to a local
        # directory, copied over as is) loads through StorageReader: same layout.
        dcp = sluice.dcp.checkpoint_module()
        sd = self.model.state_dict()
        with tempfile.TemporaryDirectory() as tmp:
            dcp.save_state_dict(sd, dcp.FileSystemWriter(tmp), no_dist=True)
            items = []
            for name in os.listdir(tmp):
                with open(os.path.join(tmp, name), "rb") as f:
                    items.append((f"{self.d}/torch/{name}", f.read()))
        self.c.mkdir(self.d + "/torch")
        self.c.write_batch(items)
        sd2 = self.fresh().state_dict()
        dcp.load_state_dict(sd2, sluice.dcp.StorageReader(self.d + "/torch", self.c), no_dist=True)
        self.assertStateEqual(sd2, sd)
        md = pickle.loads(bytes(self.c.read_bytes(self.d + "/torch/.metadata")))
        self.assertEqual(len(md.state_dict_metadata), len(sd))


if __name__ == "__main__":
    unittest.main()
