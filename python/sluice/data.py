"""PyTorch datasets over Sluice, read with the native client.

FileDataset is map-style, one sample per file: a DataLoader batch is fetched
with one batched parallel read (__getitems__), each file read straight into
one buffer for the batch. TarDataset is iterable over sharded tar files (the
WebDataset layout), each shard streamed with the client's read-ahead.
StorageOrderSampler visits samples in storage order, shuffled by blocks.

All three are fork-safe: DataLoader workers (fork, forkserver or spawn) each
connect on their own on first use; nothing opened in the parent is used in a
child.
"""

from __future__ import annotations

import io
import posixpath
import random
import tarfile
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import torch
from torch.utils.data import Dataset, IterableDataset, Sampler, get_worker_info

from .client import Client, File, FileSet


def as_tensor(buf: memoryview) -> torch.Tensor:
    """A uint8 tensor over a memoryview's bytes, without a copy (for
    output="memoryview"; output="tensor" gives tensors directly)."""
    return torch.frombuffer(buf, dtype=torch.uint8) if len(buf) else torch.empty(0, dtype=torch.uint8)


class FileDataset(Dataset):
    """A map-style dataset with one sample per file: every regular file under
    root (recursively, in path order, optionally only names ending in one of
    suffixes), or the files listed in paths.

    A batch (DataLoader with batch_size, which calls __getitems__) is read
    with one call: all its files in parallel (inflight at once), straight
    into one buffer. output says what a sample is: "bytes" (the default),
    "memoryview" (a view into the batch's buffer, no copy) or "tensor" (a
    uint8 tensor viewing the batch's buffer, which in a DataLoader worker is
    allocated in shared memory: the batch reaches the main process without
    a copy). transform, if given, is applied to it; with with_path the
    sample is (path, sample).

    The files are opened once (a FileSet) so each read costs one round trip
    to a storage target; the set holds the files as they were when the
    dataset was made.
    """

    def __init__(self, root: Optional[str] = None, *, paths: Optional[Sequence[str]] = None,
                 client: Optional[Client] = None, server: Optional[str] = None,
                 transform: Optional[Callable[[Any], Any]] = None, suffixes: Optional[Sequence[str]] = None,
                 with_path: bool = False, output: str = "bytes", inflight: int = 64):
        if output not in ("bytes", "memoryview", "tensor"):
            raise ValueError(f"sluice: output {output!r}: want bytes, memoryview or tensor")
        self.client = client or Client(server)
        if (root is None) == (paths is None):
            raise ValueError("sluice: give either root or paths")
        if root is not None:
            fs = FileSet(self.client, root=root, inflight=inflight)
            if suffixes:
                keep = [p for p in fs.paths if p.endswith(tuple(suffixes))]
                if len(keep) != len(fs.paths):
                    fs.close()
                    fs = FileSet(self.client, paths=keep, inflight=inflight)
        else:
            fs = FileSet(self.client, paths=list(paths), inflight=inflight)  # type: ignore[arg-type]
        self.files = fs
        self.transform = transform
        self.with_path = with_path
        self.output = output

    @property
    def paths(self) -> List[str]:
        return self.files.paths

    @property
    def sizes(self) -> List[int]:
        return self.files.sizes

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> List[Any]:
        idx = [int(i) for i in indices]
        sizes = [self.files.sizes[i] for i in idx]
        total = sum(sizes)
        arena: Any = None
        if self.output == "tensor":
            arena = torch.empty(total, dtype=torch.uint8)
            if get_worker_info() is not None and total:
                arena.share_memory_()  # what the worker would copy the batch into anyway
            mv = memoryview(arena.numpy()) if total else memoryview(bytearray())
        else:
            mv = memoryview(bytearray(total))
        views, offs, off = [], [], 0
        for s in sizes:
            views.append(mv[off:off + s])
            offs.append(off)
            off += s
        got = self.files.read_into(idx, views)
        out = []
        for i, v, o, n in zip(idx, views, offs, got):
            if self.output == "tensor":
                sample: Any = arena[o:o + n]
            elif self.output == "memoryview":
                sample = v[:n]
            else:
                sample = bytes(v[:n])
            if self.transform is not None:
                sample = self.transform(sample)
            out.append((self.files.paths[i], sample) if self.with_path else sample)
        return out


class StorageOrderSampler(Sampler):
    """Yields every index of a FileDataset once per epoch in an order that
    follows storage: files sorted by (storage chain of their first stripe,
    inode number, the order of creation), cut into blocks of block_size;
    with shuffle, the blocks and the samples within each block are shuffled
    anew each epoch (seed, set_epoch). Use it when the training tolerates
    block-wise shuffling; it keeps each target's reads close together."""

    def __init__(self, dataset: FileDataset, block_size: int = 1024, shuffle: bool = True, seed: int = 0):
        self.order = sorted(range(len(dataset)), key=lambda i: (dataset.files.chains[i], dataset.files.inos[i]))
        self.block_size = max(int(block_size), 1)
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self) -> Iterator[int]:
        blocks = [self.order[i:i + self.block_size] for i in range(0, len(self.order), self.block_size)]
        if self.shuffle:
            rng = random.Random(self.seed + self.epoch)
            rng.shuffle(blocks)
            blocks = [rng.sample(b, len(b)) for b in blocks]
        for b in blocks:
            yield from b


def _split_key(name: str) -> tuple:
    """WebDataset's convention: the key is the name up to the first dot of
    its last component, the rest is the field."""
    d, base = posixpath.split(name)
    key, dot, ext = base.partition(".")
    return posixpath.join(d, key), ext if dot else ""


class TarDataset(IterableDataset):
    """An iterable dataset over sharded tar files (WebDataset layout: the
    members of one sample share a name up to the first dot). Each shard is
    streamed through one open file with the client's sequential read-ahead.

    Shards are split between distributed ranks (rank, world_size) and then
    between DataLoader workers, so every sample is read once per epoch; with
    shuffle_shards the shard order changes each epoch (seed, set_epoch).

    Yields {"__key__": key, "__shard__": shard, field: bytes, ...} per sample
    (grouped) or (member name, bytes) per member with group=False; transform
    is applied to what is yielded.
    """

    def __init__(self, shards: Sequence[str], *, client: Optional[Client] = None, server: Optional[str] = None,
                 shuffle_shards: bool = False, seed: int = 0, group: bool = True,
                 transform: Optional[Callable[[Any], Any]] = None, rank: int = 0, world_size: int = 1,
                 buffer_size: int = 4 << 20):
        self.client = client or Client(server)
        self.shards = list(shards)
        self.shuffle_shards = shuffle_shards
        self.seed = seed
        self.group = group
        self.transform = transform
        self.rank, self.world_size = rank, world_size
        self.buffer_size = buffer_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def my_shards(self) -> List[str]:
        """The shards this process (rank and DataLoader worker) reads."""
        shards = list(self.shards)
        if self.shuffle_shards:
            random.Random(self.seed + self.epoch).shuffle(shards)
        shards = shards[self.rank::self.world_size]
        w = get_worker_info()
        if w is not None:
            shards = shards[w.id::w.num_workers]
        return shards

    def _members(self, shard: str) -> Iterator[tuple]:
        raw = File(self.client, shard, "r")
        with io.BufferedReader(raw, self.buffer_size) as f, tarfile.open(fileobj=f, mode="r|") as tf:
            for m in tf:
                if not m.isfile():
                    continue
                ef = tf.extractfile(m)
                yield m.name, (ef.read() if ef is not None else b"")

    def __iter__(self) -> Iterator[Any]:
        t = self.transform or (lambda x: x)
        for shard in self.my_shards():
            if not self.group:
                for name, data in self._members(shard):
                    yield t((name, data))
                continue
            cur: Optional[Dict[str, Any]] = None
            for name, data in self._members(shard):
                key, field = _split_key(name)
                if cur is None or cur["__key__"] != key:
                    if cur is not None:
                        yield t(cur)
                    cur = {"__key__": key, "__shard__": shard}
                cur[field] = data
            if cur is not None:
                yield t(cur)
