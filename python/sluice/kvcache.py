"""The KV-cache store from Python (docs/kvcache.md): write-once values of
64 KiB to tens of MiB under string keys (a hash of a token prefix), kept on
the storage targets outside the file system's namespace, for inference
servers that offload their attention KV cache.

    import sluice
    c = sluice.Client()
    c.kv_create("kvc", capacity=64 << 30)
    kv = c.kv("kvc")
    kv.put(["p/1", "p/2"], [block1, block2])  # [True, True]; False where the key had a value
    n = kv.exists(["p/1", "p/2", "p/3"])       # 2: the longest stored prefix
    kv.get_into(["p/1"], [buf])                # [len] into the caller's buffer, -1 if missing
"""

from __future__ import annotations

import os
import threading
from ctypes import c_char_p, c_int64
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple

from . import _lib

if TYPE_CHECKING:
    from .client import Client


def _keys(keys: Sequence[str]) -> Any:
    bs = []
    for k in keys:
        b = k.encode("utf-8")
        if b"\0" in b or not b:
            raise ValueError(f"sluice: kv key {k!r}: keys are non-empty and hold no NUL")
        bs.append(b)
    return (c_char_p * len(bs))(*bs)


class KVStore:
    """An open KV-cache store (Client.kv). Calls run in parallel inside the
    library with the GIL released. Fork-safe and picklable: a copy in
    another process opens the store again on first use."""

    def __init__(self, client: "Client", name: str):
        self.client = client
        self.name = name
        self._h, self._pid, self._lib = 0, 0, None
        self._mu = threading.Lock()
        self._handle()  # a missing store fails here

    def _handle(self) -> Tuple[_lib.Lib, int]:
        if self._h == -1:
            raise ValueError("sluice: the KV store is closed")
        if self._pid == os.getpid() and self._h:
            return self._lib, self._h  # type: ignore[return-value]
        with self._mu:
            if self._pid != os.getpid() or not self._h:
                lib, ch = self.client._handle()
                self._h = lib.call("sluice_kv_open", ch, self.name.encode("utf-8"))
                self._lib, self._pid = lib, os.getpid()
            return self._lib, self._h  # type: ignore[return-value]

    def put(self, keys: Sequence[str], values: Sequence[Any]) -> List[bool]:
        """Stores values[i] (any buffer: bytes, bytearray, numpy array, CPU
        torch tensor) under keys[i], all in parallel. Returns, per key,
        True where this put stored the value and False where the key already
        had one (keys are write-once: the first put wins)."""
        n = len(keys)
        if len(values) != n:
            raise ValueError(f"sluice: {n} keys and {len(values)} values")
        addrs, lens, keep = _lib.buffer_arrays(values, writable=False)
        res = (c_int64 * n)()
        lib, h = self._handle()
        lib.call("sluice_kv_put", h, n, _keys(keys), addrs, lens, res)
        return [r == 1 for r in res]

    def get_into(self, keys: Sequence[str], buffers: Sequence[Any]) -> List[int]:
        """Reads the values of keys into buffers[i] (writable, C-contiguous:
        bytearray, numpy array, CPU torch tensor) without copies, all in
        parallel. Returns each value's length, -1 for a key without a value.
        A buffer shorter than its value raises OSError (ERANGE)."""
        n = len(keys)
        if len(buffers) != n:
            raise ValueError(f"sluice: {n} keys and {len(buffers)} buffers")
        addrs, lens, keep = _lib.buffer_arrays(buffers, writable=True)
        res = (c_int64 * n)()
        lib, h = self._handle()
        lib.call("sluice_kv_get", h, n, _keys(keys), addrs, lens, res)
        return list(res)

    def get(self, keys: Sequence[str], max_size: int = 80 << 20) -> List[Optional[bytearray]]:
        """Reads the values of keys (at most max_size bytes each) and
        returns each as a bytearray, None for a key without a value."""
        bufs = [bytearray(max_size) for _ in keys]
        out: List[Optional[bytearray]] = []
        for b, r in zip(bufs, self.get_into(keys, bufs)):
            if r < 0:
                out.append(None)
            else:
                del b[r:]
                out.append(b)
        return out

    def exists(self, keys: Sequence[str]) -> int:
        """How many of keys, from the first, have a value: the longest
        stored prefix of a list of prefix keys."""
        lib, h = self._handle()
        return lib.call("sluice_kv_exists", h, len(keys), _keys(keys))

    def delete(self, keys: Sequence[str]) -> int:
        """Removes keys; returns how many had a value."""
        lib, h = self._handle()
        return lib.call("sluice_kv_delete", h, len(keys), _keys(keys))

    def close(self) -> None:
        """Forgets the store's handle (the store and its values stay)."""
        with self._mu:
            h, pid, lib = self._h, self._pid, self._lib
            self._h = -1
        if h > 0 and pid == os.getpid() and lib is not None:
            lib.call("sluice_free", h)

    def __enter__(self) -> "KVStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> dict:
        return {"client": self.client, "name": self.name}

    def __setstate__(self, st: dict) -> None:
        self.__dict__.update(st)
        self._h, self._pid, self._lib = 0, 0, None
        self._mu = threading.Lock()

    def __repr__(self) -> str:
        return f"sluice.KVStore({self.name!r})"
