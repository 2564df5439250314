"""The native Sluice client: a connection, file objects and batched reads."""

from __future__ import annotations

import contextlib
import ctypes
import errno as _errno
import io
import json
import os
import stat as _stat
import struct
import threading
from ctypes import c_char_p, c_int64, c_void_p
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from . import _lib
from ._lib import ForkError, check_pid, error

if TYPE_CHECKING:
    from .kvcache import KVStore

DEFAULT_SERVER = "127.0.0.1:9400"
DEFAULT_INFLIGHT = 64

PathLike = Union[str, "os.PathLike[str]"]
Request = Union[PathLike, Tuple[PathLike, int, int]]


def _p(path: PathLike) -> bytes:
    return os.fsencode(os.fspath(path))


@dataclass(frozen=True)
class Stat:
    """A file's attributes (the st_* fields of os.stat_result)."""

    st_size: int
    st_mode: int
    st_ino: int
    st_nlink: int
    st_uid: int
    st_gid: int
    st_atime_ns: int
    st_mtime_ns: int
    st_ctime_ns: int

    @property
    def st_mtime(self) -> float:
        return self.st_mtime_ns / 1e9

    @property
    def st_atime(self) -> float:
        return self.st_atime_ns / 1e9

    @property
    def st_ctime(self) -> float:
        return self.st_ctime_ns / 1e9

    @property
    def is_dir(self) -> bool:
        return _stat.S_ISDIR(self.st_mode)

    @property
    def is_file(self) -> bool:
        return _stat.S_ISREG(self.st_mode)

    @property
    def is_symlink(self) -> bool:
        return _stat.S_ISLNK(self.st_mode)

    @classmethod
    def _from(cls, st: _lib.StatT) -> "Stat":
        return cls(st.size, st.mode, st.ino, st.nlink, st.uid, st.gid, st.atime_ns, st.mtime_ns, st.ctime_ns)


@dataclass(frozen=True)
class DirEntry:
    """One entry of Client.scandir. size and mtime_ns are -1 and 0 when the
    listing was made without attributes."""

    name: str
    path: str
    ino: int
    mode: int
    size: int
    mtime_ns: int
    chain: int = 0

    def is_dir(self) -> bool:
        return _stat.S_ISDIR(self.mode)

    def is_file(self) -> bool:
        return _stat.S_ISREG(self.mode)

    def is_symlink(self) -> bool:
        return _stat.S_ISLNK(self.mode)


_ENTRY = struct.Struct("<QqqIII")  # cabi.PackEntries


def _unpack_entries(b: bytes) -> List[Tuple[int, int, int, int, int, str]]:
    out = []
    off, n = 0, len(b)
    unpack = _ENTRY.unpack_from
    size = _ENTRY.size
    while off < n:
        ino, sz, mtime, mode, chain, ln = unpack(b, off)
        off += size
        out.append((ino, sz, mtime, mode, chain, b[off:off + ln].decode("utf-8", "surrogateescape")))
        off += ln
    return out


def _trim(b: bytearray, r: Any) -> Any:
    """b cut to r bytes, or r if it is an exception."""
    if isinstance(r, BaseException):
        return r
    if r < len(b):
        del b[r:]
    return b


def _join(d: str, name: str) -> str:
    return d.rstrip("/") + "/" + name if d not in ("", "/") else "/" + name


class Client:
    """A connection to a Sluice file system through the client library: to
    the metadata service for the namespace and straight to the storage
    targets for data.

    Safe for use from several threads (calls release the GIL, so they run in
    parallel). Picklable: a copy connects on first use. After fork the
    Client reconnects by itself in the child, on first use; files and file
    sets opened in the parent raise ForkError there.

    server: "host:port" of the metadata service (or several, comma
    separated); default $SLUICE_SERVER, else 127.0.0.1:9400.
    timeout: seconds each operation (each item of a batch) may take, plus
    one second per 16 MiB it moves, before it fails with TimeoutError.
    read_ahead: bytes of sequential read-ahead per open file (None: the
    library's 16 MiB; 0 disables it).
    staging_dir: a local directory (the node's NVMe, or /dev/shm) where
    files created under a directory with the absorb policy (`sluice layout
    set DIR --absorb on`) are staged: their writes, fsync and close return
    once the data is durable there, and it drains to the targets in the
    background; a rename there (a checkpoint's commit) is ordered after
    the drain of the files it depends on (docs/checkpoint.md). Default
    $SLUICE_STAGING_DIR, else none (the policy is ignored).
    staging_max: the most bytes staged and not drained yet (writers wait
    for the drain past it; None: three quarters of the staging file
    system's free space).
    """

    def __init__(self, server: Optional[str] = None, *, timeout: float = 60.0,
                 read_ahead: Optional[int] = None, conns_per_server: int = 0,
                 staging_dir: Optional[str] = None, staging_max: Optional[int] = None):
        self.server = server or os.environ.get("SLUICE_SERVER") or DEFAULT_SERVER
        self.timeout = float(timeout)
        self.read_ahead = read_ahead
        self.conns_per_server = int(conns_per_server)
        self.staging_dir = staging_dir if staging_dir is not None else os.environ.get("SLUICE_STAGING_DIR") or None
        self.staging_max = staging_max
        if self.staging_max is not None and (not self.staging_dir or int(self.staging_max) <= 0):
            raise ValueError("sluice: staging_max needs a staging_dir and must be positive")
        self._h = 0
        self._pid = 0
        self._lib: Optional[_lib.Lib] = None
        self._mu = threading.Lock()
        self._closed = False
        self._servers: List[Any] = []  # serve_metrics's, stopped by close()
        self._handle()  # connect now: a wrong address fails here

    # Connection management.

    def _handle(self) -> Tuple[_lib.Lib, int]:
        pid = os.getpid()
        if self._pid == pid and self._h:
            return self._lib, self._h  # type: ignore[return-value]
        with self._mu:
            if self._closed:
                raise ValueError("sluice: the client is closed")
            if self._pid != pid or not self._h:
                lib = _lib.lib()
                ra = -1 if self.read_ahead == 0 else (self.read_ahead or 0)
                cfg = {"server": self.server, "timeout_ms": int(self.timeout * 1000), "read_ahead": ra,
                       "conns_per_server": self.conns_per_server}
                if self.staging_dir:
                    cfg["staging_dir"] = os.path.abspath(self.staging_dir)
                    cfg["staging_max"] = int(self.staging_max or 0)
                h = lib.call("sluice_connect_config", json.dumps(cfg).encode())
                self._lib, self._h, self._pid = lib, h, pid
            return self._lib, self._h  # type: ignore[return-value]

    def _call(self, name: str, *args: Any) -> int:
        lib, h = self._handle()
        return lib.call(name, h, *args)

    def close(self) -> None:
        """Closes the connection (in the process that made it; in a forked
        child this only forgets the parent's)."""
        with self._mu:
            if self._closed:
                return
            self._closed = True
            h, pid, lib = self._h, self._pid, self._lib
            self._h = 0
            servers, self._servers = self._servers, []
        if pid == os.getpid():
            for srv in servers:
                srv.shutdown()
                srv.server_close()
        if h and pid == os.getpid() and lib is not None:
            lib.call("sluice_disconnect", h)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._closed and self._h and self._pid == os.getpid():
                self._lib.call("sluice_disconnect", self._h)  # type: ignore[union-attr]
        except Exception:
            pass

    def __getstate__(self) -> dict:
        return {"server": self.server, "timeout": self.timeout, "read_ahead": self.read_ahead,
                "conns_per_server": self.conns_per_server, "staging_dir": self.staging_dir,
                "staging_max": self.staging_max}

    def __setstate__(self, st: dict) -> None:
        self.__dict__.update({"staging_dir": None, "staging_max": None, **st})
        self._h, self._pid, self._lib, self._closed = 0, 0, None, False
        self._mu = threading.Lock()
        self._servers = []

    def __repr__(self) -> str:
        return f"sluice.Client({self.server!r})"

    # Staging (the absorb policy).

    def staging_stats(self) -> dict:
        """The staging area's counts: enabled (False without staging_dir),
        staged_bytes, drained_bytes, held (staged, not drained yet),
        peak_held, limit, throttled (writes that waited for room),
        throttled_seconds, pending_segments, renames_queued, renamed,
        rename_errors, last_error, adopted (replayed from dead clients'
        areas), drain_errors, in_memory."""
        n = c_int64(0)
        h = self._call("sluice_staging_stats", ctypes.byref(n))
        return json.loads(self._take(h, n.value))

    @contextlib.contextmanager
    def staging_hold(self) -> Iterator[None]:
        """Defers the staging area's drain while the block runs (each staged
        piece waits 10 s at most), so that the drain does not take the CPUs
        from a checkpoint being serialized and written; it drains at full
        speed after. sluice.dcp.StorageWriter holds it around write_data.
        Without a staging_dir it does nothing."""
        if not self.staging_dir:
            yield
            return
        self._call("sluice_staging_hold", 1)
        try:
            yield
        finally:
            self._call("sluice_staging_hold", 0)

    def staging_metrics(self) -> str:
        """The staging area as Prometheus text: the sluice_absorb_* metrics
        that `sluice mount --http` exports (held, staged and drained bytes,
        throttled writes, queued and failed renames, ...); empty without a
        staging_dir. serve_metrics serves it over HTTP."""
        n = c_int64(0)
        h = self._call("sluice_staging_metrics", ctypes.byref(n))
        return bytes(self._take(h, n.value)).decode()

    def serve_metrics(self, host: str = "127.0.0.1", port: int = 0) -> Tuple[str, int]:
        """Serves GET /metrics (staging_metrics, for Prometheus to scrape)
        on host:port from a daemon thread of this process, and returns the
        address bound (port 0 picks one). The server stops with close().
        Forked children (DataLoader workers) do not serve it."""
        import http.server

        client = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                try:
                    body = client.staging_metrics().encode()
                except Exception as e:  # the client closed, or failed
                    self.send_error(503, str(e))
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        srv = http.server.ThreadingHTTPServer((host, port), Handler)
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, name="sluice-metrics", daemon=True).start()
        with self._mu:
            self._servers.append(srv)
        return srv.server_address[0], srv.server_address[1]

    def wait_staged(self) -> None:
        """Waits until everything this client staged has drained to the
        targets and its queued renames are done (then a loss of this node
        loses nothing of it). Bounded by the timeout plus a second per
        16 MiB staged."""
        self._call("sluice_staging_wait")

    # Files.

    def open(self, path: PathLike, mode: str = "r", buffering: int = -1,
             encoding: Optional[str] = None, errors: Optional[str] = None,
             newline: Optional[str] = None) -> Any:
        """Opens a file like the built-in open() (text by default): "rb" gives an
        io.BufferedReader, "wb"/"ab"/"xb"/"r+b" a buffered writer or random
        file, with buffering=0 the raw File, and text modes an
        io.TextIOWrapper. Data written is durable once close() returns."""
        raw = File(self, path, mode.replace("t", "").replace("b", ""))
        if buffering == 1 and "b" in mode:
            buffering = -1
        if buffering == 0:
            if "b" not in mode:
                raw.close()
                raise ValueError("sluice: can't have unbuffered text I/O")
            return raw
        size = buffering if buffering > 1 else 1 << 20
        if raw.readable() and raw.writable():
            f: Any = io.BufferedRandom(raw, size)
        elif raw.writable():
            f = io.BufferedWriter(raw, size)
        else:
            f = io.BufferedReader(raw, size)
        if "b" in mode:
            return f
        return io.TextIOWrapper(f, encoding=encoding or "utf-8", errors=errors, newline=newline)

    def stat(self, path: PathLike, follow_symlinks: bool = True) -> Stat:
        """The attributes of path (FileNotFoundError if it does not exist)."""
        st = _lib.StatT()
        self._call("sluice_stat", _p(path), 1 if follow_symlinks else 0, ctypes.byref(st))
        return Stat._from(st)

    def lstat(self, path: PathLike) -> Stat:
        return self.stat(path, follow_symlinks=False)

    def exists(self, path: PathLike) -> bool:
        try:
            self.stat(path)
            return True
        except FileNotFoundError:
            return False

    def isdir(self, path: PathLike) -> bool:
        try:
            return self.stat(path).is_dir
        except FileNotFoundError:
            return False

    def isfile(self, path: PathLike) -> bool:
        try:
            return self.stat(path).is_file
        except FileNotFoundError:
            return False

    def mkdir(self, path: PathLike, mode: int = 0o777, parents: bool = False, exist_ok: bool = False) -> None:
        """Creates a directory (with parents: and its missing parents)."""
        try:
            self._call("sluice_mkdir", _p(path), mode, 1 if parents else 0)
        except FileExistsError:
            if not exist_ok or not self.isdir(path):
                raise

    def makedirs(self, path: PathLike, mode: int = 0o777, exist_ok: bool = False) -> None:
        if not exist_ok and self.exists(path):
            raise FileExistsError(_errno.EEXIST, f"sluice: mkdir {os.fspath(path)}: file exists")
        self._call("sluice_mkdir", _p(path), mode, 1)

    def unlink(self, path: PathLike) -> None:
        """Removes a file or symlink (IsADirectoryError for a directory)."""
        self._call("sluice_unlink", _p(path))

    remove = unlink

    def rmdir(self, path: PathLike) -> None:
        """Removes an empty directory (OSError ENOTEMPTY otherwise)."""
        self._call("sluice_rmdir", _p(path))

    def rmtree(self, path: PathLike, missing_ok: bool = False) -> None:
        """Removes path and everything below it."""
        if not missing_ok and not self.exists(path):
            raise FileNotFoundError(_errno.ENOENT, f"sluice: remove {os.fspath(path)}: not found")
        self._call("sluice_remove_all", _p(path))

    def rename(self, src: PathLike, dst: PathLike, replace: bool = True) -> None:
        """Moves src to dst atomically, replacing dst unless replace is False
        (then FileExistsError)."""
        self._call("sluice_rename", _p(src), _p(dst), 0 if replace else 1)

    def truncate(self, path: PathLike, size: int) -> None:
        self._call("sluice_truncate", _p(path), size)

    def scandir(self, path: PathLike, attrs: bool = True) -> List[DirEntry]:
        """Lists a directory in name order; with attrs, each entry has its
        size and mtime from the same listing calls."""
        n = c_int64(0)
        h = self._call("sluice_listdir", _p(path), 1 if attrs else 0, ctypes.byref(n))
        buf = self._take(h, n.value)
        d = os.fspath(path)
        return [DirEntry(name, _join(d, name), ino, mode, size, mtime)
                for ino, size, mtime, mode, _, name in _unpack_entries(buf)]

    def listdir(self, path: PathLike = "/") -> List[str]:
        return [e.name for e in self.scandir(path, attrs=False)]

    def _take(self, h: int, n: int) -> bytes:
        buf = ctypes.create_string_buffer(max(n, 1))
        self._call_lib("sluice_take", h, buf, n)
        return buf.raw[:n]

    def _call_lib(self, name: str, *args: Any) -> int:
        lib, _ = self._handle()
        return lib.call(name, *args)

    # Whole files and batches.

    def read_bytes(self, path: PathLike) -> bytearray:
        """Reads a whole file (one open, one read)."""
        with File(self, path, "r") as f:
            return f.read_rest()

    def write_bytes(self, path: PathLike, data: Any, sync: bool = True) -> None:
        """Creates (or truncates) path holding data, durable when it returns
        if sync."""
        self.write_batch([(path, data)], sync=sync)

    def read_batch(self, requests: Sequence[Request], *, inflight: int = DEFAULT_INFLIGHT,
                   errors: str = "raise") -> List[Any]:
        """Reads many files or ranges in one call, at most inflight at once
        (the GIL is released meanwhile). Each request is a path (the whole
        file) or (path, offset, length). Returns a bytearray per request (cut
        to the bytes read). errors="raise" raises the first failure after
        all have finished; "return" puts the exception in its place."""
        out: List[Any] = [None] * len(requests)
        whole = [i for i, r in enumerate(requests) if not isinstance(r, tuple)]
        ranged = [i for i, r in enumerate(requests) if isinstance(r, tuple)]
        if whole:  # open them as a set (learning their sizes), then read from it
            with self.fileset([requests[i] for i in whole], errors="return", inflight=inflight) as fs:  # type: ignore[misc]
                ok = [k for k in range(len(whole)) if fs.sizes[k] >= 0]
                for k in range(len(whole)):
                    if fs.sizes[k] < 0:
                        out[whole[k]] = fs.error(k)
                bufs = [bytearray(fs.sizes[k]) for k in ok]
                res = fs.read_into(ok, bufs, inflight=inflight, errors="return")
                for k, b, r in zip(ok, bufs, res):
                    out[whole[k]] = _trim(b, r)
        if ranged:
            reqs = [requests[i] for i in ranged]
            bufs = [bytearray(max(int(r[2]), 0)) for r in reqs]  # type: ignore[index]
            res = self.read_batch_into(reqs, bufs, inflight=inflight, errors="return")  # type: ignore[arg-type]
            for i, b, r in zip(ranged, bufs, res):
                out[i] = _trim(b, r)
        if errors == "raise":
            for r in out:
                if isinstance(r, BaseException):
                    raise r
        return out

    def read_batch_into(self, requests: Sequence[Tuple[PathLike, int, int]], buffers: Sequence[Any], *,
                        inflight: int = DEFAULT_INFLIGHT, errors: str = "raise") -> List[Any]:
        """Reads requests[i] = (path, offset, length) into buffers[i] (any
        writable C-contiguous buffer of at least length bytes: bytearray,
        memoryview, numpy array, CPU torch tensor) without copies, all in
        parallel. Returns the bytes read per request (fewer only at the end
        of a file)."""
        n = len(requests)
        if len(buffers) != n:
            raise ValueError(f"sluice: {n} requests and {len(buffers)} buffers")
        cpaths = (c_char_p * n)(*[_p(r[0]) for r in requests])
        offs = (c_int64 * n)(*[int(r[1]) for r in requests])
        lens = (c_int64 * n)()
        addrs = (c_void_p * n)()
        keep = []
        for i, (r, b) in enumerate(zip(requests, buffers)):
            a, size, k = _lib.buffer_address(b, writable=True)
            if int(r[2]) > size:
                raise ValueError(f"sluice: request {i} of {r[2]} bytes into a buffer of {size}")
            addrs[i], lens[i] = a, int(r[2])
            keep.append(k)
        res = (c_int64 * n)()
        return self._batch("sluice_read_batch", [os.fspath(r[0]) for r in requests], errors,
                           n, cpaths, offs, lens, addrs, res, inflight, res=res)

    def _batch(self, name: str, names: List[str], errors: str, *args: Any, res: Any, lib_call: bool = False) -> List[Any]:
        lib, h = self._handle()
        eb = lib.errbuf()
        fn = getattr(lib.dll, name)
        r = fn(*args, eb, _lib._ERRLEN) if lib_call else fn(h, *args, eb, _lib._ERRLEN)
        if r < 0:
            raise error(-r, eb.value)
        out: List[Any] = list(res)
        if r > 0:
            msg = eb.value.decode("utf-8", "replace")
            first: Optional[OSError] = None
            for i, v in enumerate(out):
                if v < 0:
                    e = error(-v, msg if first is None else f"sluice: {names[i]}: {os.strerror(-v)}")
                    first = first or e
                    out[i] = e
            if errors == "raise":
                assert first is not None
                raise first
        return out

    def write_batch(self, items: Sequence[Tuple[PathLike, Any]], *, sync: bool = True,
                    inflight: int = DEFAULT_INFLIGHT, errors: str = "raise") -> List[Any]:
        """Writes many whole files in one call, in parallel: each (path,
        data) is created or truncated to hold data (any buffer: bytes,
        bytearray, numpy array, CPU torch tensor); with sync each is durable
        when this returns."""
        n = len(items)
        cpaths = (c_char_p * n)(*[_p(p) for p, _ in items])
        addrs, lens, keep = _lib.buffer_arrays([data for _, data in items], writable=False)
        res = (c_int64 * n)()
        return self._batch("sluice_write_batch", [os.fspath(p) for p, _ in items], errors,
                           n, cpaths, lens, addrs, res, inflight, 1 if sync else 0, res=res)

    def fileset(self, paths: Optional[Sequence[PathLike]] = None, *, root: Optional[PathLike] = None,
                recursive: bool = True, errors: str = "raise", inflight: int = DEFAULT_INFLIGHT) -> "FileSet":
        """Opens many files for reading once (from a list of paths, or every
        regular file under root) so that batch reads from them cost one
        round trip to the storage targets per file. See FileSet."""
        return FileSet(self, paths=paths, root=root, recursive=recursive, errors=errors, inflight=inflight)

    # The KV-cache store (docs/kvcache.md).

    def kv_create(self, name: str, capacity: int, *, ttl: float = 0, replicas: int = 1) -> None:
        """Creates the KV-cache store name over every storage target:
        capacity bytes in all (least recently used values are evicted past
        it), values expiring ttl seconds after their put (0: never),
        replicas copies of each. Creating it again with the same settings
        is no error."""
        self._call("sluice_kv_create", name.encode("utf-8"), int(capacity), int(ttl * 1000), int(replicas))

    def kv(self, name: str) -> "KVStore":
        """Opens the KV-cache store name (see sluice.KVStore)."""
        from .kvcache import KVStore
        return KVStore(self, name)

    def walk_files(self, root: PathLike) -> List[Tuple[str, int]]:
        """Every regular file under root, (path, size), in path order."""
        with FileSet(self, root=root) as fs:
            return list(zip(fs.paths, fs.sizes))


_MODES = {
    "r": os.O_RDONLY, "r+": os.O_RDWR,
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "w+": os.O_RDWR | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND, "a+": os.O_RDWR | os.O_CREAT | os.O_APPEND,
    "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL, "x+": os.O_RDWR | os.O_CREAT | os.O_EXCL,
}


class File(io.RawIOBase):
    """An open Sluice file, unbuffered (io.RawIOBase): readinto() reads
    straight into the caller's buffer (bytearray, memoryview, numpy array,
    CPU torch tensor) with one call into the client library, which sends
    the file's stripes to their targets in parallel. Writes go to the
    library's write-back buffer; fsync() and close() make them durable.
    Usable only in the process that opened it (ForkError elsewhere)."""

    def __init__(self, client: Client, path: PathLike, mode: str = "r", perm: int = 0o666):
        super().__init__()
        m = mode.replace("b", "")
        if m not in _MODES:
            raise ValueError(f"sluice: invalid mode {mode!r}")
        self.name = os.fspath(path)
        self.mode = mode
        self._client = client
        self._lib, ch = client._handle()
        self._pid = os.getpid()
        self._fh = self._lib.call("sluice_open", ch, _p(path), _MODES[m], perm)
        self._readable = m.startswith("r") or "+" in m
        self._writable = not m == "r"
        self._append = m.startswith("a")
        self._pos = self.fstat().st_size if self._append else 0

    def _h(self) -> int:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        check_pid(self._pid, f"file {self.name}")
        return self._fh

    def readable(self) -> bool:
        return self._readable

    def writable(self) -> bool:
        return self._writable

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:
        raise io.UnsupportedOperation("sluice: a Sluice file has no file descriptor")

    def readinto(self, b: Any) -> int:
        """Reads up to len(b) bytes at the file position into b."""
        n = self.pread_into(b, self._pos)
        self._pos += n
        return n

    def pread_into(self, b: Any, offset: int) -> int:
        """Reads up to len(b) bytes at offset into b without moving the file
        position; fewer only at the end of the file."""
        h = self._h()
        addr, n, keep = _lib.buffer_address(b, writable=True)
        if n == 0:
            return 0
        r = self._lib.call("sluice_pread", h, addr, n, offset)
        del keep
        return r

    def pread(self, n: int, offset: int) -> bytes:
        buf = bytearray(n)
        got = self.pread_into(buf, offset)
        return bytes(memoryview(buf)[:got])

    def readall(self) -> bytes:
        """The rest of the file, read with one call."""
        return bytes(self.read_rest())

    def read_rest(self) -> bytearray:
        """The rest of the file, read with one call into a new bytearray
        (readall without its copy to bytes)."""
        size = self.fstat().st_size
        buf = bytearray(max(size - self._pos, 0))
        n = self.pread_into(buf, self._pos) if buf else 0
        self._pos += n
        del buf[n:]
        return buf

    def write(self, b: Any) -> int:
        n = self.pwrite(b, self._pos)
        self._pos += n
        return n

    def pwrite(self, b: Any, offset: int) -> int:
        """Writes b at offset without moving the file position."""
        h = self._h()
        addr, n, keep = _lib.buffer_address(b, writable=False)
        if n == 0:
            return 0
        r = self._lib.call("sluice_pwrite", h, addr, n, offset)
        del keep
        return r

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._h()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self.fstat().st_size + offset
        else:
            raise ValueError(f"sluice: invalid whence {whence}")
        if pos < 0:
            raise OSError(_errno.EINVAL, f"sluice: seek {self.name}: negative position {pos}")
        self._pos = pos
        return pos

    def tell(self) -> int:
        return self._pos

    def truncate(self, size: Optional[int] = None) -> int:
        size = self._pos if size is None else size
        self._lib.call("sluice_ftruncate", self._h(), size)
        return size

    def fsync(self) -> None:
        """Makes everything written so far durable."""
        self._lib.call("sluice_fsync", self._h())

    def fstat(self) -> Stat:
        st = _lib.StatT()
        self._lib.call("sluice_fstat", self._h(), ctypes.byref(st))
        return Stat._from(st)

    def close(self) -> None:
        """Flushes, syncs and closes the file; in a forked child it only
        forgets the parent's handle (the parent's runtime must never be
        called there)."""
        if self.closed:
            return
        try:
            fh = getattr(self, "_fh", 0)
            if fh and getattr(self, "_pid", 0) == os.getpid():
                self._fh = 0
                self._lib.call("sluice_close", fh)
        finally:
            super().close()

    def __repr__(self) -> str:
        return f"<sluice.File {self.name!r} mode={self.mode!r}>"


class FileSet:
    """Many regular files opened once for reading, so that reading a batch
    of them costs one round trip to the storage targets per file and none to
    the metadata service (the dataset's case: the same files every epoch).

    paths, sizes, inos and chains describe the files in order (sizes[i] is
    -1 where opening failed with errors="return"). A file replaced after the
    set was made is still read as it was. Picklable and fork-safe: a copy in
    another process opens the same paths again on first use.
    """

    def __init__(self, client: Client, paths: Optional[Sequence[PathLike]] = None, *,
                 root: Optional[PathLike] = None, recursive: bool = True, errors: str = "raise",
                 inflight: int = DEFAULT_INFLIGHT):
        if (paths is None) == (root is None):
            raise ValueError("sluice: give either paths or root")
        self.client = client
        self.inflight = inflight
        self._h, self._pid, self._lib = 0, 0, None
        self._mu = threading.Lock()
        if root is not None:
            lib, ch = client._handle()
            h = lib.call("sluice_fileset_dir", ch, _p(root), 1 if recursive else 0)
            self._set(lib, h)
            self._describe()
            self.errnos = [0] * len(self.paths)
        else:
            self.paths = [os.fspath(p) for p in paths]  # type: ignore[union-attr]
            errs = self._open_paths()
            self._describe()
            self.errnos = [-e if e < 0 else 0 for e in errs]
            bad = [i for i, e in enumerate(errs) if e < 0]
            if bad and errors == "raise":
                e = self.error(bad[0])
                self.close()
                if len(bad) > 1:
                    e.strerror += f" (and {len(bad) - 1} more)"
                raise e

    def error(self, i: int) -> OSError:
        """The error of file i, which failed to open (sizes[i] == -1)."""
        en = self.errnos[i] or _errno.ENOENT
        return error(en, f"sluice: open {self.paths[i]}: {os.strerror(en)}")

    def _set(self, lib: _lib.Lib, h: int) -> None:
        self._lib, self._h, self._pid = lib, h, os.getpid()

    def _open_paths(self) -> List[int]:
        lib, ch = self.client._handle()
        n = len(self.paths)
        cpaths = (c_char_p * n)(*[_p(p) for p in self.paths])
        res = (c_int64 * n)()
        h = lib.call("sluice_fileset_paths", ch, n, cpaths, res, self.inflight)
        self._set(lib, h)
        return list(res)

    def _describe(self) -> None:
        n = c_int64(0)
        rh = self._lib.call("sluice_fileset_entries", self._h, ctypes.byref(n))  # type: ignore[union-attr]
        buf = ctypes.create_string_buffer(max(n.value, 1))
        self._lib.call("sluice_take", rh, buf, n.value)  # type: ignore[union-attr]
        es = _unpack_entries(buf.raw[:n.value])
        self.paths = [e[5] for e in es]
        self.sizes = [e[1] for e in es]
        self.inos = [e[0] for e in es]
        self.chains = [e[4] for e in es]

    def _handle(self) -> Tuple[_lib.Lib, int]:
        if self._h == -1:
            raise ValueError("sluice: the file set is closed")
        if self._pid == os.getpid() and self._h:
            return self._lib, self._h  # type: ignore[return-value]
        with self._mu:
            if self._pid != os.getpid() or not self._h:
                self._open_paths()  # a copy in another process: open the same paths
            return self._lib, self._h  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self.paths)

    def read(self, indices: Iterable[int], *, inflight: Optional[int] = None) -> List[bytearray]:
        """Reads whole files indices[i] into new bytearrays, in parallel."""
        idx = list(indices)
        bufs = [bytearray(max(self.sizes[i], 0)) for i in idx]
        self.read_into(idx, bufs, inflight=inflight)
        return bufs

    def read_into(self, indices: Sequence[int], buffers: Sequence[Any], offsets: Optional[Sequence[int]] = None,
                  lengths: Optional[Sequence[int]] = None, *, inflight: Optional[int] = None,
                  errors: str = "raise") -> List[Any]:
        """Reads file indices[i] (from offsets[i], default 0; lengths[i]
        bytes, default all of buffers[i]) into buffers[i], all in parallel.
        Returns the bytes read per request."""
        n = len(indices)
        if len(buffers) != n:
            raise ValueError(f"sluice: {n} indices and {len(buffers)} buffers")
        lib, h = self._handle()
        cidx = (c_int64 * n)(*indices)
        offs = (c_int64 * n)(*(offsets if offsets is not None else [0] * n))
        lens = (c_int64 * n)()
        addrs = (c_void_p * n)()
        keep = []
        for i, b in enumerate(buffers):
            a, size, k = _lib.buffer_address(b, writable=True)
            want = size if lengths is None else int(lengths[i])
            if want > size:
                raise ValueError(f"sluice: request {i} of {want} bytes into a buffer of {size}")
            addrs[i], lens[i] = a, want
            keep.append(k)
        res = (c_int64 * n)()
        names = [self.paths[i] if 0 <= i < len(self.paths) else str(i) for i in indices]
        return self.client._batch("sluice_fileset_read", names, errors, h, n, cidx, offs, lens, addrs, res,
                                  inflight or self.inflight, res=res, lib_call=True)

    def close(self) -> None:
        with self._mu:
            h, pid, lib = self._h, self._pid, self._lib
            self._h = -1
        if h > 0 and pid == os.getpid() and lib is not None:
            lib.call("sluice_free", h)

    def __enter__(self) -> "FileSet":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if self._h > 0 and self._pid == os.getpid():
                self._lib.call("sluice_free", self._h)  # type: ignore[union-attr]
        except Exception:
            pass

    def __getstate__(self) -> dict:
        return {"client": self.client, "inflight": self.inflight, "paths": self.paths, "sizes": self.sizes,
                "inos": self.inos, "chains": self.chains, "errnos": self.errnos}

    def __setstate__(self, st: dict) -> None:
        self.__dict__.update(st)
        self._h, self._pid, self._lib = 0, 0, None
        self._mu = threading.Lock()
