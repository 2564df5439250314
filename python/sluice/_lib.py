"""Loading libsluice (the Go client library built as a C shared library) and
calling it through ctypes.

A Go runtime does not survive fork(2): in a child, the threads that ran the
parent's runtime are gone and the first call into it hangs. So every process
uses its own copy of the library: the first process loads the file itself,
and a forked child (a DataLoader worker) loads a private copy (an in-memory
file, or a temporary file removed at once), which starts a fresh runtime.
Handles made by one process are refused in another (ForkError) before any
call reaches the library.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import os
import shutil
import tempfile
import threading
from ctypes import POINTER, c_char_p, c_int32, c_int64, c_uint32, c_uint64, c_void_p
from typing import Any, List, Optional, Tuple

ABI_VERSION = 4
_ERRLEN = 2048


class StatT(ctypes.Structure):
    """sluice_stat_t (cmd/libsluice/sluice.h)."""

    _fields_ = [
        ("size", c_int64),
        ("atime_ns", c_int64),
        ("mtime_ns", c_int64),
        ("ctime_ns", c_int64),
        ("ino", c_uint64),
        ("mode", c_uint32),
        ("nlink", c_uint32),
        ("uid", c_uint32),
        ("gid", c_uint32),
    ]


_E = [c_char_p, c_int32]  # every function ends with (errbuf, errlen)

_SIGNATURES = {
    "sluice_abi_version": [],
    "sluice_handles": [],
    "sluice_connect": [c_char_p, c_int64, c_int32, c_int64] + _E,
    "sluice_connect_config": [c_char_p] + _E,
    "sluice_staging_stats": [c_int64, POINTER(c_int64)] + _E,
    "sluice_staging_metrics": [c_int64, POINTER(c_int64)] + _E,
    "sluice_staging_wait": [c_int64] + _E,
    "sluice_staging_hold": [c_int64, c_int32] + _E,
    "sluice_disconnect": [c_int64] + _E,
    "sluice_open": [c_int64, c_char_p, c_int32, c_uint32] + _E,
    "sluice_pread": [c_int64, c_void_p, c_int64, c_int64] + _E,
    "sluice_pwrite": [c_int64, c_void_p, c_int64, c_int64] + _E,
    "sluice_fsync": [c_int64] + _E,
    "sluice_close": [c_int64] + _E,
    "sluice_ftruncate": [c_int64, c_int64] + _E,
    "sluice_fstat": [c_int64, POINTER(StatT)] + _E,
    "sluice_stat": [c_int64, c_char_p, c_int32, POINTER(StatT)] + _E,
    "sluice_mkdir": [c_int64, c_char_p, c_uint32, c_int32] + _E,
    "sluice_unlink": [c_int64, c_char_p] + _E,
    "sluice_rmdir": [c_int64, c_char_p] + _E,
    "sluice_remove_all": [c_int64, c_char_p] + _E,
    "sluice_rename": [c_int64, c_char_p, c_char_p, c_int32] + _E,
    "sluice_truncate": [c_int64, c_char_p, c_int64] + _E,
    "sluice_listdir": [c_int64, c_char_p, c_int32, POINTER(c_int64)] + _E,
    "sluice_take": [c_int64, c_void_p, c_int64] + _E,
    "sluice_free": [c_int64] + _E,
    "sluice_read_batch": [c_int64, c_int64, POINTER(c_char_p), POINTER(c_int64), POINTER(c_int64),
                          POINTER(c_void_p), POINTER(c_int64), c_int32] + _E,
    "sluice_write_batch": [c_int64, c_int64, POINTER(c_char_p), POINTER(c_int64), POINTER(c_void_p),
                           POINTER(c_int64), c_int32, c_int32] + _E,
    "sluice_fileset_paths": [c_int64, c_int64, POINTER(c_char_p), POINTER(c_int64), c_int32] + _E,
    "sluice_fileset_dir": [c_int64, c_char_p, c_int32] + _E,
    "sluice_fileset_entries": [c_int64, POINTER(c_int64)] + _E,
    "sluice_fileset_read": [c_int64, c_int64, POINTER(c_int64), POINTER(c_int64), POINTER(c_int64),
                            POINTER(c_void_p), POINTER(c_int64), c_int32] + _E,
    "sluice_kv_create": [c_int64, c_char_p, c_int64, c_int64, c_int32] + _E,
    "sluice_kv_open": [c_int64, c_char_p] + _E,
    "sluice_kv_put": [c_int64, c_int64, POINTER(c_char_p), POINTER(c_void_p), POINTER(c_int64),
                      POINTER(c_int64)] + _E,
    "sluice_kv_get": [c_int64, c_int64, POINTER(c_char_p), POINTER(c_void_p), POINTER(c_int64),
                      POINTER(c_int64)] + _E,
    "sluice_kv_exists": [c_int64, c_int64, POINTER(c_char_p)] + _E,
    "sluice_kv_delete": [c_int64, c_int64, POINTER(c_char_p)] + _E,
}


class ForkError(OSError):
    """A handle (an open file, a file set) made by another process: after
    fork, a child must open its own. A Client reconnects by itself."""


def library_path() -> str:
    """The shared library to load: $SLUICE_LIB, else _libsluice.so next to
    this module."""
    p = os.environ.get("SLUICE_LIB")
    if p:
        return p
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_libsluice.so")


class Lib:
    """One process's copy of libsluice. Calls release the GIL (ctypes.CDLL)."""

    def __init__(self, path: str, pid: int):
        self.path = path
        self.pid = pid
        self.dll = ctypes.CDLL(path)
        for name, args in _SIGNATURES.items():
            fn = getattr(self.dll, name)
            fn.argtypes = args
            fn.restype = c_int64
        v = self.dll.sluice_abi_version()
        if v != ABI_VERSION:
            raise ImportError(f"sluice: {path} has ABI version {v}, this package needs {ABI_VERSION}: rebuild it (make python)")
        self._local = threading.local()

    def errbuf(self) -> ctypes.Array:
        b = getattr(self._local, "errbuf", None)
        if b is None:
            b = self._local.errbuf = ctypes.create_string_buffer(_ERRLEN)
        return b

    def call(self, name: str, *args: Any) -> int:
        """Calls a function that ends with (errbuf, errlen) and raises its
        error as an OSError subclass (FileNotFoundError, TimeoutError, ...)."""
        eb = self.errbuf()
        r = getattr(self.dll, name)(*args, eb, _ERRLEN)
        if r < 0:
            raise error(-r, eb.value)
        return r


def error(errno: int, msg: Any) -> OSError:
    """The Python exception for errno with message msg: OSError picks the
    subclass (FileNotFoundError for ENOENT, TimeoutError for ETIMEDOUT...)."""
    if isinstance(msg, bytes):
        msg = msg.decode("utf-8", "replace")
    return OSError(errno, msg or os.strerror(errno))


_lock = threading.Lock()
_current: Optional[Lib] = None
# A copy of the library in an in-memory file that this process has not
# loaded, made before its first fork: its children load it (sharing its
# pages) instead of each copying the library.
_spare: Optional[int] = None
_spare_pid = 0


def _before_fork() -> None:
    global _spare, _spare_pid
    if _current is None or (_spare is not None and _spare_pid == os.getpid()):
        return
    try:
        _spare, _spare_pid = _memfd_copy(library_path()), os.getpid()
    except OSError:
        _spare = None  # no memfd here: each child copies the library


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # another thread may have held it at fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def lib() -> Lib:
    """This process's copy of the library, loaded on first use."""
    global _current
    cur = _current
    pid = os.getpid()
    if cur is not None and cur.pid == pid:
        return cur
    with _lock:
        cur = _current
        if cur is not None and cur.pid == pid:
            return cur
        path = library_path()
        if cur is None:
            _current = Lib(path, pid)
        else:
            _current = _load_private_copy(path, pid)
        return _current


def _memfd_copy(path: str) -> int:
    fd = os.memfd_create("libsluice", os.MFD_CLOEXEC)  # kept over fork, not over exec
    try:
        with open(path, "rb") as src, os.fdopen(os.dup(fd), "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _load_private_copy(path: str, pid: int) -> Lib:
    """Loads a copy of the library that this process has not loaded yet
    (the one its parent prepared, else a new one), so that it starts its
    own Go runtime: dlopen of a file already loaded returns the loaded copy,
    whose runtime is dead in this process.

    The copy's file descriptor stays open: dlopen knows the copy by its
    /proc/self/fd name, and a later copy (in a grandchild) must not get the
    same name."""
    global _spare
    fd, _spare = _spare, None
    if fd is None and hasattr(os, "memfd_create"):
        try:
            fd = _memfd_copy(path)
        except OSError:
            fd = None
    if fd is not None:
        try:
            return Lib(f"/proc/self/fd/{fd}", pid)
        except OSError:
            pass  # e.g. memfd mapped noexec: fall back to a file
    d = tempfile.mkdtemp(prefix="libsluice-")
    try:
        p = os.path.join(d, "_libsluice.so")
        shutil.copyfile(path, p)
        return Lib(p, pid)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def check_pid(owner_pid: int, what: str) -> None:
    """Raises ForkError if this process is not owner_pid."""
    pid = os.getpid()
    if pid != owner_pid:
        raise ForkError(_errno.EBADF, f"sluice: this {what} belongs to process {owner_pid}, not to this process {pid} "
                        "(a fork, such as a DataLoader worker): open it again in this process; "
                        "a sluice.Client reconnects by itself")


def buffer_arrays(bufs: Any, writable: bool) -> Tuple[Any, Any, List[Any]]:
    """Returns the C arrays of the addresses and sizes of buffers (see
    buffer_address) and what keeps them alive during the call."""
    n = len(bufs)
    addrs, lens, keep = (c_void_p * n)(), (c_int64 * n)(), []
    for i, b in enumerate(bufs):
        addrs[i], lens[i], k = buffer_address(b, writable)
        keep.append(k)
    return addrs, lens, keep


def buffer_address(buf: Any, writable: bool) -> Tuple[int, int, Any]:
    """Returns (address, nbytes, keepalive) of a C-contiguous buffer: any
    object with the buffer protocol (bytearray, bytes for reading from it,
    memoryview, numpy array, mmap) or a CPU torch tensor. keepalive must
    live until the call returns."""
    if hasattr(buf, "data_ptr") and hasattr(buf, "is_contiguous"):  # torch.Tensor: no buffer protocol
        if buf.device.type != "cpu":
            raise ValueError("sluice: a tensor buffer must be on the CPU")
        if not buf.is_contiguous():
            raise ValueError("sluice: a tensor buffer must be contiguous")
        return buf.data_ptr(), buf.numel() * buf.element_size(), buf
    mv = memoryview(buf)
    if not mv.c_contiguous:
        raise ValueError("sluice: the buffer must be C-contiguous")
    if mv.ndim != 1 or mv.format != "B":
        mv = mv.cast("B")
    n = mv.nbytes
    if n == 0:
        return 0, 0, mv
    if not mv.readonly:
        arr = (ctypes.c_char * n).from_buffer(mv)
        return ctypes.addressof(arr), n, (arr, mv)
    if writable:
        raise TypeError("sluice: the buffer is read-only")
    if isinstance(buf, bytes):
        p = ctypes.c_char_p(buf)  # points into the bytes object, no copy
        return ctypes.cast(p, c_void_p).value or 0, n, (p, buf)
    try:
        import numpy as np  # read-only views (slices of bytes, mmap): address without a copy
        a = np.frombuffer(mv, dtype=np.uint8)
        return a.ctypes.data, n, (a, mv)
    except ImportError:
        copy = bytearray(mv)
        arr = (ctypes.c_char * n).from_buffer(copy)
        return ctypes.addressof(arr), n, (arr, copy)
