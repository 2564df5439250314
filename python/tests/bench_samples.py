"""Run by test/python's BenchmarkSamples, not by unittest: times reading the
same small samples (one file each) through the native client's batch call,
through the mount and from a local directory, a DataLoader epoch with
workers over each, and the per-call cost of a 4 KiB read. Prints one JSON
object: seconds per method.

Usage: bench_samples.py --root SLUICE_DIR [--mount MOUNTED_DIR] [--local LOCAL_DIR]
       [--workers 4] [--batch 64] [--big SLUICE_FILE]
"""

import argparse
import json
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor

import _env
import torch
from torch.utils.data import DataLoader, Dataset

from sluice.data import FileDataset


def keep(batch):
    return batch


class PathDataset(Dataset):
    """What a user writes for files on a POSIX path (the mount, a local
    directory): open and read each sample."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            return f.read()


def read_posix(paths, sizes, threads):
    def one(k):
        buf = bytearray(sizes[k])
        with open(paths[k], "rb", buffering=0) as f:
            n = f.readinto(buf)
        assert n == sizes[k], (paths[k], n, sizes[k])
        return n

    if threads == 1:
        return sum(one(k) for k in range(len(paths)))
    with ThreadPoolExecutor(threads) as ex:
        return sum(ex.map(one, range(len(paths)), chunksize=16))


def timed(fn):
    start = time.perf_counter()
    n = fn()
    return time.perf_counter() - start, n


def epoch(loader):
    n = 0
    for batch in loader:
        n += sum(len(x) for x in batch)
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--mount")
    ap.add_argument("--local")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--big")
    a = ap.parse_args()
    torch.set_num_threads(1)
    c = _env.client(read_ahead=0)
    out = {}

    # Listing once (not timed with the reads): a FileSet opens every file.
    t, fs = timed(lambda: c.fileset(root=a.root))
    out["fileset_open_s"] = t
    paths, sizes = fs.paths, fs.sizes
    out["files"] = len(paths)
    out["bytes"] = sum(sizes)
    rel = [p[len(a.root.rstrip("/")) + 1:] for p in paths]

    # Each source is read once (first read), each in batches of a.batch.
    def batch_fileset():
        total = 0
        for i in range(0, len(paths), a.batch):
            idx = list(range(i, min(i + a.batch, len(paths))))
            bufs = [bytearray(sizes[k]) for k in idx]
            total += sum(fs.read_into(idx, bufs))
        return total

    def batch_paths():
        total = 0
        for i in range(0, len(paths), a.batch):
            total += sum(len(b) for b in c.read_batch(paths[i:i + a.batch]))
        return total

    out["native_fileset_s"], n1 = timed(batch_fileset)
    out["native_paths_s"], n2 = timed(batch_paths)
    assert n1 == n2 == out["bytes"], (n1, n2, out["bytes"])
    for name, d in (("mount", a.mount), ("local", a.local)):
        if not d:
            continue
        ps = [os.path.join(d, r) for r in rel]
        out[f"{name}_1thread_s"], n = timed(lambda: read_posix(ps, sizes, 1))
        assert n == out["bytes"]
        out[f"{name}_16threads_s"], n = timed(lambda: read_posix(ps, sizes, 16))
        assert n == out["bytes"]

    # A DataLoader epoch with workers (started by the epoch, as each epoch does).
    ds = FileDataset(paths=paths, client=c)
    out["loader_native_s"], n = timed(lambda: epoch(DataLoader(ds, batch_size=a.batch, shuffle=True,
                                                               num_workers=a.workers, collate_fn=keep)))
    assert n == out["bytes"]
    for name, d in (("mount", a.mount), ("local", a.local)):
        if d:
            pds = PathDataset([os.path.join(d, r) for r in rel])
            out[f"loader_{name}_s"], n = timed(lambda: epoch(DataLoader(pds, batch_size=a.batch, shuffle=True,
                                                                        num_workers=a.workers, collate_fn=keep)))
            assert n == out["bytes"]

    # Per-call cost: 4 KiB reads at random offsets, one at a time.
    if a.big:
        size = c.stat(a.big).st_size
        rng = random.Random(1)
        offs = [rng.randrange(0, size - 4096) & ~4095 for _ in range(2000)]
        buf = bytearray(4096)
        with c.open(a.big, "rb", buffering=0) as f:
            for o in offs[:100]:
                f.pread_into(buf, o)
            t, _ = timed(lambda: [f.pread_into(buf, o) for o in offs])
        out["pread4k_native_us"] = t / len(offs) * 1e6
        if a.mount:
            mp = os.path.join(a.mount, os.path.relpath(a.big, a.root))
            fd = os.open(mp, os.O_RDONLY)
            try:
                t, _ = timed(lambda: [os.preadv(fd, [buf], o) for o in offs])
            finally:
                os.close(fd)
            out["pread4k_mount_us"] = t / len(offs) * 1e6
    print(json.dumps(out), flush=True)
    fs.close()


if __name__ == "__main__":
    main()
