"""Run by test/python's BenchmarkSamples, not by unittest: times reading the
same small samples (one file each) through the native client's batch call,
through the Go client library (asked of the Go benchmark over stdin and
stdout), through the mount and from a local directory; then a DataLoader
epoch with workers over each, and the cost of one 4 KiB read. Every
measurement runs in several rounds, interleaved, each after dropping the
page cache of every file involved (posix_fadvise DONTNEED on the local
files, the server's data directory and the files through the mount), so all
reads are cold. Prints one JSON object: method -> list of seconds.

Usage: bench_samples.py --root SLUICE_DIR --drop DIR... [--mount NAME=MOUNTED_DIR]...
       [--local LOCAL_DIR] [--workers 4] [--batch 64] [--big SLUICE_FILE]
       [--rounds 3] [--go]
"""

import argparse
import json
import os
import random
import sys
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


class PathTensorDataset(Dataset):
    """The same, done well: a batch read into one tensor in shared memory
    (as FileDataset(output="tensor") does), one file after another."""

    def __init__(self, paths, sizes):
        self.paths, self.sizes = paths, sizes

    def __len__(self):
        return len(self.paths)

    def __getitems__(self, idx):
        sizes = [self.sizes[i] for i in idx]
        arena = torch.empty(sum(sizes), dtype=torch.uint8).share_memory_()
        a = arena.numpy()
        out, off = [], 0
        for i, n in zip(idx, sizes):
            with open(self.paths[i], "rb", buffering=0) as f:
                got = f.readinto(a[off:off + n])
            out.append(arena[off:off + got])
            off += n
        return out


class MemoryDataset(Dataset):
    """No storage at all: each sample is a copy of the right length of
    one buffer held in memory (what a read from the page cache costs at
    least, without its system calls). An epoch over it is the
    DataLoader's own work with nothing to read; not a floor (with bytes a
    local directory came out ahead of it on the 2-core VM: workers that
    never wait take the CPU from the main process). Samples held whole by
    the parent were slower still: every fork copies the parent's page
    tables, and the workers' touches copy the objects' pages."""

    def __init__(self, sizes):
        self.sizes = sizes
        self.blob = os.urandom(max(sizes))

    def __len__(self):
        return len(self.sizes)

    def __getitem__(self, i):
        return self.blob[:self.sizes[i]]


class MemoryTensorDataset(MemoryDataset):
    """The same, each batch copied into one tensor in shared memory as
    PathTensorDataset and FileDataset(output="tensor") do."""

    def __getitems__(self, idx):
        sizes = [self.sizes[i] for i in idx]
        arena = torch.empty(sum(sizes), dtype=torch.uint8).share_memory_()
        a = arena.numpy()
        blob = memoryview(self.blob)
        out, off = [], 0
        for n in sizes:
            a[off:off + n] = blob[:n]
            out.append(arena[off:off + n])
            off += n
        return out


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


def drop_caches(dirs):
    """Drops the page cache of every file below dirs (clean pages only: the
    files were written and fsynced before)."""
    for d in dirs:
        for dp, _, names in os.walk(d):
            for n in names:
                try:
                    fd = os.open(os.path.join(dp, n), os.O_RDONLY)
                except OSError:
                    continue
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)


def ask_go(what):
    """Asks the Go benchmark (our parent) to run a measurement."""
    print(f"RUN {what}", flush=True)
    line = sys.stdin.readline().split()
    assert line and line[0] == "DONE", line
    return float(line[1])


def epoch(loader):
    n = 0
    for batch in loader:
        n += sum(len(x) for x in batch)
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--drop", action="append", default=[])
    ap.add_argument("--mount", action="append", default=[])
    ap.add_argument("--local")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--big")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--go", action="store_true")
    a = ap.parse_args()
    mounts = [tuple(m.split("=", 1)) for m in a.mount]  # (name, dir)
    torch.set_num_threads(1)
    c = _env.client(read_ahead=0)
    out = {}

    def add(name, secs):
        out.setdefault(name, []).append(secs)

    fs = c.fileset(root=a.root)
    paths, sizes = fs.paths, fs.sizes
    total = sum(sizes)
    out["files"], out["bytes"] = len(paths), total
    rel = [p[len(a.root.rstrip("/")) + 1:] for p in paths]
    drops = list(a.drop) + [d for _, d in mounts] + ([a.local] if a.local else [])
    posix = mounts + ([("local", a.local)] if a.local else [])

    def batch_fileset():
        n = 0
        for i in range(0, len(paths), a.batch):
            idx = list(range(i, min(i + a.batch, len(paths))))
            n += sum(fs.read_into(idx, [bytearray(sizes[k]) for k in idx]))
        return n

    def batch_paths():
        return sum(len(b) for i in range(0, len(paths), a.batch) for b in c.read_batch(paths[i:i + a.batch]))

    methods = [("native_fileset", batch_fileset), ("native_paths", batch_paths)]
    for name, d in posix:
        ps = [os.path.join(d, r) for r in rel]
        methods.append((f"{name}_16threads", lambda ps=ps: read_posix(ps, sizes, 16)))
        methods.append((f"{name}_1thread", lambda ps=ps: read_posix(ps, sizes, 1)))
    for _ in range(a.rounds):
        for name, fn in methods:
            drop_caches(drops)
            start = time.perf_counter()
            n = fn()
            add(name, time.perf_counter() - start)
            assert n == total, (name, n, total)
        if a.go:
            drop_caches(drops)
            add("go_library", ask_go("samples"))

    # DataLoader epochs with workers (started by each epoch, as by default).
    loaders = [("loader_native", FileDataset(paths=paths, client=c)),
               ("loader_native_tensor", FileDataset(paths=paths, client=c, output="tensor"))]
    for name, d in posix:
        ps = [os.path.join(d, r) for r in rel]
        loaders.append((f"loader_{name}", PathDataset(ps)))
        loaders.append((f"loader_{name}_tensor", PathTensorDataset(ps, sizes)))
    # The DataLoader's own cost, with no storage behind it.
    loaders.append(("loader_memory", MemoryDataset(sizes)))
    loaders.append(("loader_memory_tensor", MemoryTensorDataset(sizes)))
    for _ in range(max(a.rounds - 1, 1)):
        for name, ds in loaders:
            drop_caches(drops)
            dl = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers, collate_fn=keep)
            start = time.perf_counter()
            n = epoch(dl)
            add(name, time.perf_counter() - start)
            assert n == total, (name, n, total)

    # One 4 KiB read at a time, random offsets (warm: the cost of a call).
    if a.big:
        size = c.stat(a.big).st_size
        rng = random.Random(1)
        offs = [rng.randrange(0, size - 4096) & ~4095 for _ in range(2000)]
        buf = bytearray(4096)
        fd = os.open(os.path.join(mounts[0][1], os.path.relpath(a.big, a.root)), os.O_RDONLY) if mounts else -1
        if fd >= 0:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no kernel read-ahead
        with c.open(a.big, "rb", buffering=0) as f:
            for _ in range(a.rounds):
                start = time.perf_counter()
                for o in offs:
                    f.pread_into(buf, o)
                add("pread4k_native_us", (time.perf_counter() - start) / len(offs) * 1e6)
                if a.go:
                    add("pread4k_go_us", ask_go("pread4k"))
                if fd >= 0:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # each read goes to the server
                    start = time.perf_counter()
                    for o in offs:
                        os.preadv(fd, [buf], o)
                    add("pread4k_mount_us", (time.perf_counter() - start) / len(offs) * 1e6)
        if fd >= 0:
            os.close(fd)
    fs.close()
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
