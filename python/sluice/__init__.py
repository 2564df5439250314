"""Sluice from Python: the native client (through the Go client library,
no FUSE, no HTTP), an fsspec file system ("sluice://"), PyTorch datasets
with batched reads, and checkpoint helpers.

    import sluice
    c = sluice.Client("127.0.0.1:9400")
    with c.open("/datasets/a.bin", "wb") as f:
        f.write(b"...")
    samples = c.read_batch(["/datasets/a.bin", ("/datasets/b.bin", 0, 4096)])

See docs/python.md in the repository.
"""

from ._lib import ForkError
from .client import Client, DirEntry, File, FileSet, Stat
from .checkpoint import load, save
from .kvcache import KVStore

__all__ = ["Client", "File", "FileSet", "KVStore", "Stat", "DirEntry", "ForkError", "save", "load", "read_batch"]
__version__ = "0.1.0"


def read_batch(client: Client, requests, **kwargs):
    """Client.read_batch as a function: reads many files or (path, offset,
    length) ranges in one parallel call."""
    return client.read_batch(requests, **kwargs)


def _register_fsspec() -> None:
    """Makes fsspec know "sluice://" without importing the module yet."""
    try:
        import fsspec
    except ImportError:
        return
    fsspec.register_implementation("sluice", "sluice.filesystem.SluiceFileSystem", clobber=True)


_register_fsspec()
