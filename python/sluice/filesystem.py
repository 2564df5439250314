"""fsspec file system for Sluice: "sluice://[HOST:PORT]/PATH".

    import fsspec
    fs = fsspec.filesystem("sluice", server="127.0.0.1:9400")
    fs.ls("/datasets")
    with fsspec.open("sluice://127.0.0.1:9400/datasets/a.parquet") as f: ...

With no HOST:PORT in the URL and no server argument, the server is
$SLUICE_SERVER, else 127.0.0.1:9400. Paths are absolute POSIX paths; names in
listings carry no protocol. Reads of many files or ranges (cat, cat_ranges)
are one batched parallel call; mv is an atomic rename; rm(recursive=True)
removes a tree on the client library's side.
"""

from __future__ import annotations

import datetime
import os
import posixpath
import secrets
import stat as _stat
from typing import Any, Dict, List, Optional, Union
from urllib.parse import urlsplit

from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

from .client import Client, DirEntry, File, Stat

PROTOCOL = "sluice"


def register() -> None:
    """Registers the "sluice" protocol with fsspec (also done by importing
    sluice, and by the package's fsspec.specs entry point)."""
    import fsspec

    fsspec.register_implementation(PROTOCOL, SluiceFileSystem, clobber=True)


def _type(mode: int) -> str:
    if _stat.S_ISDIR(mode):
        return "directory"
    if _stat.S_ISREG(mode):
        return "file"
    if _stat.S_ISLNK(mode):
        return "link"
    return "other"


class SluiceFileSystem(AbstractFileSystem):
    """fsspec file system over the native Sluice client."""

    protocol = PROTOCOL
    root_marker = "/"
    sep = "/"

    def __init__(self, server: Optional[str] = None, *, client: Optional[Client] = None, timeout: float = 60.0,
                 inflight: int = 64, **kwargs: Any):
        super().__init__(**kwargs)
        self.client = client or Client(server, timeout=timeout)
        self.inflight = inflight

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = os.fspath(path) if not isinstance(path, str) else path
        if path.startswith(PROTOCOL + "://"):
            path = urlsplit(path).path
        elif path.startswith(PROTOCOL + "::"):
            path = path[len(PROTOCOL) + 2:]
        path = posixpath.normpath("/" + path) if path else "/"
        if path.startswith("//"):
            path = "/" + path.lstrip("/")
        return path

    @staticmethod
    def _get_kwargs_from_urls(path: str) -> Dict[str, Any]:
        if path.startswith(PROTOCOL + "://"):
            netloc = urlsplit(path).netloc
            if netloc:
                return {"server": netloc}
        return {}

    def unstrip_protocol(self, name: str) -> str:
        if name.startswith(PROTOCOL + "://"):
            return name
        return f"{PROTOCOL}://{self.client.server}{self._strip_protocol(name)}"

    # Metadata.

    @staticmethod
    def _info(path: str, st: Union[Stat, DirEntry]) -> Dict[str, Any]:
        if isinstance(st, Stat):
            mode, size, ino, mtime = st.st_mode, st.st_size, st.st_ino, st.st_mtime_ns
        else:
            mode, size, ino, mtime = st.mode, st.size, st.ino, st.mtime_ns
        t = _type(mode)
        return {"name": path, "size": size if t == "file" else 0, "type": t, "mode": mode, "ino": ino,
                "mtime": mtime / 1e9}

    def info(self, path: str, **kwargs: Any) -> Dict[str, Any]:
        p = self._strip_protocol(path)
        return self._info(p, self.client.stat(p))

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> List[Any]:
        p = self._strip_protocol(path)
        try:
            entries = self.client.scandir(p, attrs=detail)
        except NotADirectoryError:
            info = self.info(p)
            return [info] if detail else [p]
        if not detail:
            return [e.path for e in entries]
        return [self._info(e.path, e) for e in entries]

    def exists(self, path: str, **kwargs: Any) -> bool:
        return self.client.exists(self._strip_protocol(path))

    def isdir(self, path: str) -> bool:
        return self.client.isdir(self._strip_protocol(path))

    def isfile(self, path: str) -> bool:
        return self.client.isfile(self._strip_protocol(path))

    def size(self, path: str) -> int:
        return self.info(path)["size"]

    def modified(self, path: str) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.client.stat(self._strip_protocol(path)).st_mtime)

    def created(self, path: str) -> datetime.datetime:
        """The inode's change time: Sluice, like POSIX, keeps no birth time."""
        return datetime.datetime.fromtimestamp(self.client.stat(self._strip_protocol(path)).st_ctime)

    def ukey(self, path: str) -> str:
        st = self.client.stat(self._strip_protocol(path))
        return f"{st.st_ino}-{st.st_size}-{st.st_mtime_ns}"

    def checksum(self, path: str) -> int:
        return hash(self.ukey(path))

    # Namespace changes.

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        p = self._strip_protocol(path)
        if create_parents:
            self.client.mkdir(p, parents=True)  # no error if it exists
        else:
            self.client.mkdir(p)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        self.client.makedirs(self._strip_protocol(path), exist_ok=exist_ok)

    def rmdir(self, path: str) -> None:
        self.client.rmdir(self._strip_protocol(path))

    def rm_file(self, path: str) -> None:
        self.client.unlink(self._strip_protocol(path))

    def _rm(self, path: str) -> None:
        p = self._strip_protocol(path)
        if self.client.isdir(p):
            self.client.rmdir(p)
        else:
            self.client.unlink(p)

    def rm(self, path: Any, recursive: bool = False, maxdepth: Optional[int] = None) -> None:
        if recursive and maxdepth is None:
            paths = path if isinstance(path, list) else [path]
            for p in paths:
                for q in (self.glob(p) if isinstance(p, str) and any(c in p for c in "*?[") else [p]):
                    self.client.rmtree(self._strip_protocol(q))
            self.invalidate_cache()
            return
        paths = self.expand_path(path, recursive=recursive, maxdepth=maxdepth)
        for p in reversed(paths):
            self._rm(p)

    def mv(self, path1: Any, path2: Any, recursive: bool = False, maxdepth: Optional[int] = None,
           **kwargs: Any) -> None:
        """Moves with one atomic rename when path1 is one path (a file, or a
        directory with recursive=True); else copies and removes."""
        if isinstance(path1, str) and isinstance(path2, str) and not any(c in path1 for c in "*?["):
            src, dst = self._strip_protocol(path1), self._strip_protocol(path2)
            st = self.client.stat(src)
            if st.is_dir and not recursive:
                raise IsADirectoryError(f"sluice: mv {src}: is a directory (use recursive=True)")
            if self.client.isdir(dst) and not st.is_dir:
                dst = posixpath.join(dst, posixpath.basename(src))
            self.client.rename(src, dst)
            return
        super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)

    rename = mv

    def touch(self, path: str, truncate: bool = True, **kwargs: Any) -> None:
        p = self._strip_protocol(path)
        if truncate or not self.client.exists(p):
            File(self.client, p, "w").close()

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        src, dst = self._strip_protocol(path1), self._strip_protocol(path2)
        if self.client.isdir(src):
            self.client.mkdir(dst, parents=True)
            return
        buf = bytearray(8 << 20)
        with File(self.client, src, "r") as fi, File(self.client, dst, "w") as fo:
            off = 0
            while True:
                n = fi.pread_into(buf, off)
                if n == 0:
                    break
                fo.pwrite(memoryview(buf)[:n], off)
                off += n

    # Data.

    def cat_file(self, path: str, start: Optional[int] = None, end: Optional[int] = None, **kwargs: Any) -> bytes:
        p = self._strip_protocol(path)
        if start is None and end is None:
            return bytes(self.client.read_bytes(p))
        with File(self.client, p, "r") as f:
            size = f.fstat().st_size
            s = 0 if start is None else (start if start >= 0 else max(size + start, 0))
            e = size if end is None else (end if end >= 0 else max(size + end, 0))
            return f.pread(max(min(e, size) - s, 0), s)

    def cat(self, path: Any, recursive: bool = False, on_error: str = "raise", **kwargs: Any) -> Any:
        """Contents of one path (bytes) or of many ({path: bytes}), the many
        read in one batched parallel call."""
        paths = self.expand_path(path, recursive=recursive)
        if len(paths) == 1 and isinstance(path, str) and not any(c in path for c in "*?[") and not recursive:
            return self.cat_file(paths[0])
        files = [p for p in paths if not self.isdir(p)]
        res = self.client.read_batch(files, inflight=self.inflight, errors="return")
        out: Dict[str, Any] = {}
        for p, r in zip(files, res):
            if isinstance(r, BaseException):
                if on_error == "raise":
                    raise r
                if on_error == "omit":
                    continue
                out[p] = r
            else:
                out[p] = bytes(r)
        return out

    def cat_ranges(self, paths: List[str], starts: Any, ends: Any, max_gap: Optional[int] = None,
                   on_error: str = "return", **kwargs: Any) -> List[Any]:
        """Byte ranges [starts[i], ends[i]) of paths[i], all read in one
        batched parallel call. Negative or None ends count from the end of
        the file."""
        n = len(paths)
        starts = starts if isinstance(starts, list) else [starts] * n
        ends = ends if isinstance(ends, list) else [ends] * n
        if len(starts) != n or len(ends) != n:
            raise ValueError("sluice: cat_ranges needs one start and one end per path")
        ps = [self._strip_protocol(p) for p in paths]
        sizes: Dict[str, int] = {}
        need = sorted({p for p, s, e in zip(ps, starts, ends) if e is None or e < 0 or (s is not None and s < 0)})
        if need:
            with self.client.fileset(need, errors="return") as fset:
                sizes = dict(zip(need, fset.sizes))
        reqs = []
        for p, s, e in zip(ps, starts, ends):
            size = sizes.get(p, 0)
            s = 0 if s is None else (s if s >= 0 else max(size + s, 0))
            e = size if e is None else (e if e >= 0 else max(size + e, 0))
            reqs.append((p, s, max(e - s, 0)))
        res = self.client.read_batch(reqs, inflight=self.inflight, errors="return")
        out = []
        for r in res:
            if isinstance(r, BaseException):
                if on_error != "return":
                    raise r
                out.append(r)
            else:
                out.append(bytes(r))
        return out

    def pipe_file(self, path: str, value: bytes, **kwargs: Any) -> None:
        self.client.write_bytes(self._strip_protocol(path), value)

    def _open(self, path: str, mode: str = "rb", block_size: Any = None, autocommit: bool = True,
              cache_options: Optional[Dict[str, Any]] = None, **kwargs: Any) -> "SluiceFile":
        return SluiceFile(self, self._strip_protocol(path), mode, block_size=block_size, autocommit=autocommit,
                          cache_options=cache_options, **kwargs)


class SluiceFile(AbstractBufferedFile):
    """A file opened through fsspec: reads fetch ranges from one open
    Sluice file (fsspec's block cache on top); writes go out in blocks with
    pwrite and are durable when close() returns. With autocommit=False the
    data goes to a temporary name and commit() renames it into place."""

    DEFAULT_BLOCK_SIZE = 4 << 20

    def __init__(self, fs: SluiceFileSystem, path: str, mode: str = "rb", block_size: Any = None,
                 autocommit: bool = True, cache_type: str = "readahead", cache_options: Any = None, **kwargs: Any):
        self._raw: Optional[File] = None
        if mode == "rb":
            self._raw = File(fs.client, path, "r")
            kwargs.setdefault("size", self._raw.fstat().st_size)
        elif mode not in ("wb", "ab", "xb"):
            raise NotImplementedError(f"sluice: file mode {mode!r} not supported")
        self._target = path
        fmode = "wb" if mode == "xb" else mode
        if mode == "xb" and fs.client.exists(path):
            raise FileExistsError(f"sluice: {path}: file exists")
        super().__init__(fs, path, fmode, block_size=block_size, autocommit=autocommit, cache_type=cache_type,
                         cache_options=cache_options, **kwargs)

    def _fetch_range(self, start: int, end: int) -> bytes:
        assert self._raw is not None
        return self._raw.pread(max(end - start, 0), start)

    def _initiate_upload(self) -> None:
        path = self._target
        if not self.autocommit:
            path = f"{self._target}.tmp.{os.getpid()}.{secrets.token_hex(4)}"
        if self.mode == "ab":
            self._raw = File(self.fs.client, path, "a")
            self._append_at = self._raw.tell()
        else:
            self._raw = File(self.fs.client, path, "w")
            self._append_at = 0
        self._upload_path = path

    def _upload_chunk(self, final: bool = False) -> bool:
        assert self._raw is not None
        view = self.buffer.getbuffer()
        try:
            self._raw.pwrite(view, self._append_at + self.offset)
        finally:
            view.release()
        if final:
            self._raw.close()
            if self.autocommit:
                self._raw = None
        return True

    def commit(self) -> None:
        if self._raw is not None and not self._raw.closed:
            self._raw.close()
        if getattr(self, "_upload_path", self._target) != self._target:
            self.fs.client.rename(self._upload_path, self._target)

    def discard(self) -> None:
        if self._raw is not None and not self._raw.closed:
            self._raw.close()
        if getattr(self, "_upload_path", self._target) != self._target:
            self.fs.client.unlink(self._upload_path)

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.mode == "rb" and self._raw is not None:
                self._raw.close()

    def readinto(self, b: Any) -> int:
        """Reads into b; a read past fsspec's cache goes straight into b."""
        if self.mode != "rb":
            raise ValueError("File not in read mode")
        mv = memoryview(b).cast("B")
        if len(mv) >= self.blocksize and self._raw is not None:
            n = self._raw.pread_into(mv, self.loc)
            self.loc += n
            return n
        data = self.read(len(mv))
        mv[:len(data)] = data
        return len(data)
