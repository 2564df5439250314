"""A torch.distributed.checkpoint storage on Sluice: StorageWriter and
StorageReader for the checkpoint module of the installed PyTorch
(torch.distributed._shard.checkpoint in 1.13, torch.distributed.checkpoint
in 2.x, whose extra methods are provided too).

    dcp = sluice.dcp.checkpoint_module()   # torch.distributed.checkpoint, or _shard.checkpoint in 1.13
    dcp.save_state_dict(model.state_dict(), sluice.dcp.StorageWriter("/ckpt/step100", client), no_dist=True)
    dcp.load_state_dict(state, sluice.dcp.StorageReader("/ckpt/step100", client), no_dist=True)

Files hold the items as torch's FileSystemWriter lays them out (the same
.metadata, the same offsets), so torch's FileSystemReader reads them through
the mount and StorageReader reads checkpoints torch wrote there. Shards are
written in parallel, each fsynced; the coordinator commits by writing
.metadata.tmp, fsyncing it and renaming it to .metadata.
"""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Deque, Dict, List, Optional, Tuple

from .checkpoint import _MemReader, _resolve, default_client
from .client import Client


def _dcp() -> Any:
    """The checkpoint module of this PyTorch: torch.distributed.checkpoint
    (2.x), else torch.distributed._shard.checkpoint (1.13)."""
    try:
        import torch.distributed.checkpoint as m
        if hasattr(m, "StorageWriter"):
            return m
    except ImportError:
        pass
    try:
        import torch.distributed._shard.checkpoint as m  # type: ignore[no-redef]
    except ValueError as e:
        if "mutable default" not in str(e):
            raise
        _fix_py311_dataclass()
        import torch.distributed._shard.checkpoint as m  # type: ignore[no-redef]
    return m


_BROKEN = "torch.distributed._shard.sharded_tensor.metadata"


def _fix_py311_dataclass() -> None:
    """PyTorch 1.13's torch.distributed._shard cannot be imported on Python
    3.11 (Debian's python3-torch): a dataclass field has a dataclass
    instance as its default, which 3.11 refuses as mutable. PyTorch 2.0
    changed it to a default_factory; this loads that one module with the
    same change, and nothing else."""
    import importlib.abc
    import importlib.util
    import sys

    class Fix(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        origin = ""

        def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
            if name != _BROKEN:
                return None
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            if spec is None or not spec.origin:
                return None
            self.origin = spec.origin
            return importlib.util.spec_from_file_location(name, spec.origin, loader=self)

        def create_module(self, spec: Any) -> Any:
            return None

        def exec_module(self, module: Any) -> None:
            with open(self.origin) as f:
                src = f.read().replace("field(default=TensorProperties())", "field(default_factory=TensorProperties)")
            exec(compile(src, self.origin, "exec"), module.__dict__)

    for name in [n for n in sys.modules if n.startswith("torch.distributed._shard")]:
        del sys.modules[name]  # half-imported by the failed attempt
    sys.meta_path.insert(0, Fix())


def checkpoint_module() -> Any:
    """This PyTorch's torch.distributed.checkpoint module (save_state_dict,
    load_state_dict, ...), importable on Debian's torch 1.13 with Python
    3.11 too (see _fix_py311_dataclass)."""
    return _dcp()


def _dcp_parts() -> Dict[str, Any]:
    m = _dcp()
    base = m.__name__
    import importlib

    planner = importlib.import_module(base + ".planner")
    storage = importlib.import_module(base + ".storage")
    fsmod = importlib.import_module(base + ".filesystem")
    return {
        "StorageWriter": m.StorageWriter, "StorageReader": m.StorageReader,
        "WriteResult": storage.WriteResult, "WriteItemType": planner.WriteItemType,
        "LoadItemType": planner.LoadItemType, "StorageInfo": fsmod._StorageInfo,
    }


_P = _dcp_parts()


def _narrow(t: Any, offsets: Any, lengths: Any) -> Any:
    for dim, (o, n) in enumerate(zip(offsets, lengths)):
        if o != 0 or n != t.size(dim):
            t = t.narrow(dim, o, n)
    return t


@dataclasses.dataclass
class _Prefix:
    prefix: str


def _checkpoint_path(checkpoint_id: Any) -> str:
    return os.fspath(checkpoint_id)


# Items are serialized (or parsed) in groups of about _GROUP bytes; one
# group is written (or read) in the background while the next is
# serialized (parsed), at most _AHEAD groups at a time: memory stays
# within a few groups, and the storage I/O (which releases the GIL)
# overlaps torch's (de)serialization.
_GROUP = 64 << 20
_AHEAD = 2


class StorageWriter(_P["StorageWriter"]):  # type: ignore[misc,valid-type]
    """Writes a torch.distributed.checkpoint to a Sluice directory: the
    items of each rank serialized as torch's FileSystemWriter does (so
    torch's FileSystemReader reads it through the mount), written as
    files in parallel (up to inflight at once, each striped, each
    fsynced), then committed by the coordinator: .metadata.tmp written
    and fsynced, then renamed to .metadata.

    path: a Sluice path or sluice://HOST:PORT/PATH. single_file_per_rank:
    one file per rank instead of one per item.
    """

    def __init__(self, path: Any = "", client: Optional[Client] = None, *, single_file_per_rank: bool = False,
                 sync_files: bool = True, inflight: int = 16):
        super().__init__()
        self.client, self.path = _resolve(os.fspath(path), client) if path else (client, "")
        self.single_file_per_rank = single_file_per_rank
        self.sync_files = sync_files
        self.inflight = inflight

    # PyTorch 2.x names.
    def reset(self, checkpoint_id: Any = None) -> None:
        if checkpoint_id:
            self.client, self.path = _resolve(_checkpoint_path(checkpoint_id), self.client)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Any) -> bool:
        return str(checkpoint_id).startswith("sluice://")

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.init(is_coordinator)

    def storage_meta(self) -> Any:
        return None

    # The interface of 1.13 (and 2.x).
    def init(self, is_coordinator: bool) -> None:
        if self.client is None:
            self.client = default_client()
        self.is_coordinator = is_coordinator

    def prepare_local_plan(self, plan: Any) -> Any:
        self.client.mkdir(self.path, parents=True, exist_ok=True)
        return plan

    def prepare_global_plan(self, plans: List[Any]) -> List[Any]:
        return [dataclasses.replace(p, storage_data=_Prefix(f"__{i}_")) for i, p in enumerate(plans)]

    def write_data(self, plan: Any, planner: Any) -> Any:
        import torch
        from torch.futures import Future

        prefix = plan.storage_data.prefix
        items = list(plan.items)
        groups = [items] if self.single_file_per_rank else [[it] for it in items]
        results: List[Any] = []
        ex = ThreadPoolExecutor(max_workers=1)
        writes: Deque[Any] = deque()

        def submit(files: List[Tuple[str, Any]]) -> None:
            writes.append(ex.submit(self._flush, files))
            while len(writes) > _AHEAD:
                writes.popleft().result()
        try:
            # With a staging area: its drain waits until the shards are
            # staged, instead of taking the CPUs from the save.
            with self.client.staging_hold():
                self._serialize(prefix, groups, results, submit, planner, torch)
                while writes:
                    writes.popleft().result()
        finally:
            ex.shutdown(wait=True)
        fut: Any = Future()
        fut.set_result(results)
        return fut

    def _serialize(self, prefix: str, groups: List[List[Any]], results: List[Any], submit: Any,
                   planner: Any, torch: Any) -> None:
        """Serializes the items' files, handing them to submit in groups of
        about _GROUP bytes."""
        pending: List[Tuple[str, Any]] = []
        pending_bytes = 0
        for n, group in enumerate(groups):
            name = f"{prefix}{n}.distcp"
            stream = io.BytesIO()
            # Bytes first, then tensors, as FileSystemWriter does.
            for it in [i for i in group if i.type == _P["WriteItemType"].BYTE_IO] + \
                      [i for i in group if i.type != _P["WriteItemType"].BYTE_IO]:
                data = planner.resolve_data(it)
                off = stream.tell()
                if it.type == _P["WriteItemType"].BYTE_IO:
                    stream.write(data.getbuffer())
                else:
                    t = data.detach().cpu()
                    if t.storage().size() != t.numel():
                        t = t.clone()
                    torch.save(t, stream)
                ln = stream.tell() - off
                results.append(_P["WriteResult"](index=it.index, size_in_bytes=ln,
                                                 storage_data=_P["StorageInfo"](name, off, ln)))
            pending.append((self.path.rstrip("/") + "/" + name, stream.getbuffer()))
            pending_bytes += stream.tell()
            if pending_bytes >= _GROUP:
                submit(pending)
                pending, pending_bytes = [], 0
        submit(pending)

    def _flush(self, files: List[Tuple[str, Any]]) -> None:
        if files:
            self.client.write_batch(files, sync=self.sync_files, inflight=self.inflight)
            for _, v in files:
                v.release()

    def finish(self, metadata: Any, results: List[List[Any]]) -> None:
        md: Dict[Any, Any] = {}
        for wrs in results:
            md.update({wr.index: wr.storage_data for wr in wrs})
        metadata.storage_data = md
        base = self.path.rstrip("/")
        self.client.write_batch([(base + "/.metadata.tmp", pickle.dumps(metadata))], sync=True)
        self.client.rename(base + "/.metadata.tmp", base + "/.metadata")

class StorageReader(_P["StorageReader"]):  # type: ignore[misc,valid-type]
    """Reads a torch.distributed.checkpoint from a Sluice directory
    (written by StorageWriter, or by torch's FileSystemWriter through the
    mount): all the items a rank needs are fetched with batched parallel
    reads straight into buffers, then loaded into the planner's tensors."""

    def __init__(self, path: Any = "", client: Optional[Client] = None, *, inflight: int = 64):
        super().__init__()
        self.client, self.path = _resolve(os.fspath(path), client) if path else (client, "")
        self.inflight = inflight
        self.storage_data: Dict[Any, Any] = {}

    def reset(self, checkpoint_id: Any = None) -> None:
        if checkpoint_id:
            self.client, self.path = _resolve(_checkpoint_path(checkpoint_id), self.client)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Any) -> bool:
        return str(checkpoint_id).startswith("sluice://")

    def set_up_storage_reader(self, metadata: Any, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.init(metadata, is_coordinator)

    def read_metadata(self) -> Any:
        if self.client is None:
            self.client = default_client()
        return pickle.loads(self.client.read_bytes(self.path.rstrip("/") + "/.metadata"))

    def init(self, metadata: Any, is_coordinator: bool) -> None:
        self.storage_data = metadata.storage_data

    def prepare_local_plan(self, plan: Any) -> Any:
        return plan

    def prepare_global_plan(self, plans: List[Any]) -> List[Any]:
        return plans

    def read_data(self, plan: Any, planner: Any) -> Any:
        import torch
        from torch.futures import Future

        base = self.path.rstrip("/") + "/"
        groups: List[List[Any]] = [[]]
        size = 0
        for it in plan.items:
            groups[-1].append(it)
            size += self.storage_data[it.storage_index].length
            if size >= _GROUP:
                groups.append([])
                size = 0
        groups = [g for g in groups if g]
        # The next groups are read in the background while one is parsed.
        with ThreadPoolExecutor(max_workers=1) as ex:
            reads: Deque[Any] = deque(ex.submit(self._fetch, base, g) for g in groups[:_AHEAD])
            for i, g in enumerate(groups):
                bufs = reads.popleft().result()
                if i + _AHEAD < len(groups):
                    reads.append(ex.submit(self._fetch, base, groups[i + _AHEAD]))
                self._load(base, g, bufs, planner, torch)
        fut: Any = Future()
        fut.set_result(None)
        return fut

    def _fetch(self, base: str, items: List[Any]) -> List[Any]:
        infos = [self.storage_data[it.storage_index] for it in items]
        return self.client.read_batch([(base + s.relative_path, s.offset, s.length) for s in infos],
                                      inflight=self.inflight)

    def _load(self, base: str, items: List[Any], bufs: List[Any], planner: Any, torch: Any) -> None:
        infos = [self.storage_data[it.storage_index] for it in items]
        for it, s, b in zip(items, infos, bufs):
            if len(b) != s.length:
                raise OSError(f"sluice: checkpoint {base}{s.relative_path}: {len(b)} of {s.length} bytes at {s.offset}")
            if it.type == _P["LoadItemType"].BYTE_IO:
                planner.load_bytes(it, io.BytesIO(b))
                continue
            t = torch.load(_MemReader(b), map_location="cpu")
            t = _narrow(t, it.storage_offsets, it.lengths)
            target = planner.resolve_tensor(it).detach()
            if target.size() != t.size():
                raise ValueError(f"sluice: checkpoint item {it.storage_index}: size {tuple(t.size())}, "
                                 f"want {tuple(target.size())}")
            target.copy_(t)
            planner.commit_tensor(it, target)
