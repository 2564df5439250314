"""fsspec's asynchronous interface for Sluice.

    from sluice.asyncfs import AsyncSluiceFileSystem
    fs = AsyncSluiceFileSystem(server="127.0.0.1:9400", asynchronous=True)
    data = await fs._cat_file("/datasets/a.bin")
    parts = await asyncio.gather(*(fs._cat_file(p) for p in paths))

Code written for fsspec's async file systems (zarr, kerchunk, dask's
async readers) can use it; with asynchronous=False (the default) fsspec
runs the same coroutines on its own event loop thread and the usual
synchronous methods work too.

Every call runs the native client's synchronous call on a thread pool of
`inflight` threads; the client releases the GIL while it waits, so calls
from many coroutines proceed in parallel. Reads of many files or ranges
(`_cat`, `_cat_ranges`) stay one batched call.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional

from fsspec.asyn import AsyncFileSystem

from .client import Client
from .filesystem import PROTOCOL, SluiceFileSystem


class AsyncSluiceFileSystem(AsyncFileSystem):
    """fsspec AsyncFileSystem over the native Sluice client."""

    protocol = PROTOCOL
    root_marker = "/"
    sep = "/"

    def __init__(self, server: Optional[str] = None, *, client: Optional[Client] = None, timeout: float = 60.0,
                 inflight: int = 64, asynchronous: bool = False, loop: Any = None, **kwargs: Any):
        super().__init__(asynchronous=asynchronous, loop=loop, **kwargs)
        # The synchronous file system does the work; it is not cached by
        # fsspec's instance cache under this one's arguments.
        self.sync = SluiceFileSystem(server, client=client, timeout=timeout, inflight=inflight, skip_instance_cache=True)
        self.client = self.sync.client
        self._pool = ThreadPoolExecutor(max_workers=inflight, thread_name_prefix="sluice-async")

    _strip_protocol = SluiceFileSystem._strip_protocol
    _get_kwargs_from_urls = staticmethod(SluiceFileSystem._get_kwargs_from_urls)

    def unstrip_protocol(self, name: str) -> str:
        return self.sync.unstrip_protocol(name)

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    # Metadata.

    async def _info(self, path: str, **kwargs: Any) -> Dict[str, Any]:
        return await self._call(self.sync.info, path)

    async def _ls(self, path: str, detail: bool = True, **kwargs: Any) -> List[Any]:
        return await self._call(self.sync.ls, path, detail=detail)

    async def _exists(self, path: str, **kwargs: Any) -> bool:
        return await self._call(self.sync.exists, path)

    async def _isdir(self, path: str) -> bool:
        return await self._call(self.sync.isdir, path)

    async def _isfile(self, path: str) -> bool:
        return await self._call(self.sync.isfile, path)

    async def _size(self, path: str) -> int:
        return await self._call(self.sync.size, path)

    async def _mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        await self._call(self.sync.mkdir, path, create_parents=create_parents)

    async def _makedirs(self, path: str, exist_ok: bool = False) -> None:
        await self._call(self.sync.makedirs, path, exist_ok=exist_ok)

    async def _rm_file(self, path: str, **kwargs: Any) -> None:
        await self._call(self.sync.rm_file, path)

    async def _rm(self, path: Any, recursive: bool = False, maxdepth: Optional[int] = None, **kwargs: Any) -> None:
        await self._call(self.sync.rm, path, recursive=recursive, maxdepth=maxdepth)

    async def _mv(self, path1: Any, path2: Any, recursive: bool = False, maxdepth: Optional[int] = None,
                  **kwargs: Any) -> None:
        await self._call(self.sync.mv, path1, path2, recursive=recursive, maxdepth=maxdepth)

    async def _cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        await self._call(self.sync.cp_file, path1, path2)

    # Data.

    async def _cat_file(self, path: str, start: Optional[int] = None, end: Optional[int] = None,
                        **kwargs: Any) -> bytes:
        return await self._call(self.sync.cat_file, path, start=start, end=end)

    async def _cat(self, path: Any, recursive: bool = False, on_error: str = "raise", **kwargs: Any) -> Any:
        # One batched call for many files, not one call per file.
        return await self._call(self.sync.cat, path, recursive=recursive, on_error=on_error)

    async def _cat_ranges(self, paths: List[str], starts: Any, ends: Any, max_gap: Optional[int] = None,
                          on_error: str = "return", **kwargs: Any) -> List[Any]:
        return await self._call(self.sync.cat_ranges, paths, starts, ends, max_gap=max_gap, on_error=on_error)

    async def _pipe_file(self, path: str, value: bytes, **kwargs: Any) -> None:
        await self._call(self.sync.pipe_file, path, value)

    def _open(self, path: str, mode: str = "rb", block_size: Any = None, autocommit: bool = True,
              cache_options: Any = None, **kwargs: Any) -> Any:
        # File objects are synchronous in fsspec: the native file's.
        return self.sync._open(path, mode=mode, block_size=block_size, autocommit=autocommit,
                               cache_options=cache_options, **kwargs)
