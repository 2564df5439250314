"""Checkpoints on Sluice: torch.save/torch.load-style helpers (the
torch.distributed.checkpoint storage is in sluice.dcp).

Files are written with the client library's parallel striped writes, made
durable (fsync) and committed atomically by a rename: a reader sees the old
file or all of the new one.
"""

from __future__ import annotations

import io
import os
import secrets
import threading
from typing import Any, Optional, Tuple
from urllib.parse import urlsplit

from .client import Client

_default: Optional[Client] = None
_default_mu = threading.Lock()


def default_client() -> Client:
    """The process's shared Client for $SLUICE_SERVER (else 127.0.0.1:9400)."""
    global _default
    with _default_mu:
        if _default is None:
            _default = Client()
        return _default


def _resolve(path: str, client: Optional[Client]) -> Tuple[Client, str]:
    """Client and path for a path or a sluice://HOST:PORT/PATH URL."""
    if path.startswith("sluice://"):
        u = urlsplit(path)
        if u.netloc and client is None:
            client = Client(u.netloc)
        path = u.path or "/"
    return (client or default_client()), path


class _MemReader(io.RawIOBase):
    """A seekable reader over a buffer, without copying it (io.BytesIO would
    copy a bytearray)."""

    def __init__(self, buf: Any):
        super().__init__()
        self._mv = memoryview(buf).cast("B")
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = min(len(b), len(self._mv) - self._pos)
        if n <= 0:
            return 0
        memoryview(b).cast("B")[:n] = self._mv[self._pos:self._pos + n]
        self._pos += n
        return n

    def read(self, n: int = -1) -> bytes:
        end = len(self._mv) if n is None or n < 0 else min(len(self._mv), self._pos + n)
        out = self._mv[self._pos:end].tobytes()
        self._pos = max(self._pos, end)
        return out

    def seek(self, off: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._mv)}[whence]
        self._pos = max(base + off, 0)
        return self._pos

    def tell(self) -> int:
        return self._pos


def write_atomic(client: Client, path: str, data: Any, sync: bool = True) -> None:
    """Writes data to a temporary name beside path (one parallel striped
    write), makes it durable, and renames it over path."""
    tmp = f"{path}.tmp.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        client.write_batch([(tmp, data)], sync=sync)
        client.rename(tmp, path)
    except BaseException:
        try:
            client.unlink(tmp)
        except OSError:
            pass
        raise


def save(obj: Any, path: str, *, client: Optional[Client] = None, **kwargs: Any) -> None:
    """torch.save(obj) to a Sluice path (or sluice://HOST:PORT/PATH):
    serialized in memory, written with one parallel write, fsynced and
    renamed into place, so the file is either the old one or all of the new
    one. kwargs go to torch.save."""
    import torch

    c, p = _resolve(path, client)
    buf = io.BytesIO()
    torch.save(obj, buf, **kwargs)
    view = buf.getbuffer()
    try:
        write_atomic(c, p, view)
    finally:
        view.release()


def load(path: str, *, client: Optional[Client] = None, map_location: Any = None, **kwargs: Any) -> Any:
    """torch.load from a Sluice path (or sluice://HOST:PORT/PATH), read with
    one call into one buffer. kwargs go to torch.load."""
    import torch

    c, p = _resolve(path, client)
    data = c.read_bytes(p)
    return torch.load(_MemReader(data), map_location=map_location, **kwargs)
