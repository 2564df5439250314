"""The asynchronous fsspec file system (sluice.asyncfs) against a real
server: coroutines from one event loop run in parallel, return the bytes
written, raise the standard exceptions, and the synchronous mirror methods
fsspec derives from them work too."""

import asyncio
import random
import time
import unittest

import _env

from sluice.asyncfs import AsyncSluiceFileSystem


def rand(n, seed):
    return random.Random(seed).randbytes(n)


class AsyncFsTest(unittest.TestCase):
    def test_coroutines(self):
        async def main():
            fs = AsyncSluiceFileSystem(server=_env.SERVER, asynchronous=True)
            d = _env.fresh_dir(fs.client, "afs")
            blobs = {f"{d}/f{i}": rand(1000 + 37 * i, i) for i in range(40)}
            await asyncio.gather(*(fs._pipe_file(p, b) for p, b in blobs.items()))
            got = await asyncio.gather(*(fs._cat_file(p) for p in blobs))
            self.assertEqual(got, list(blobs.values()))
            self.assertEqual(await fs._cat_file(f"{d}/f3", 10, 20), blobs[f"{d}/f3"][10:20])
            many = await fs._cat(list(blobs))
            self.assertEqual(many, blobs)
            ranges = await fs._cat_ranges([f"{d}/f1", f"{d}/f2"], [0, 5], [4, 9])
            self.assertEqual(ranges, [blobs[f"{d}/f1"][:4], blobs[f"{d}/f2"][5:9]])
            info = await fs._info(f"{d}/f7")
            self.assertEqual((info["type"], info["size"]), ("file", len(blobs[f"{d}/f7"])))
            names = sorted(await fs._ls(d, detail=False))
            self.assertEqual(names, sorted(blobs))
            await fs._mv(f"{d}/f0", f"{d}/moved")
            self.assertFalse(await fs._exists(f"{d}/f0"))
            self.assertEqual(await fs._cat_file(f"{d}/moved"), blobs[f"{d}/f0"])
            await fs._rm_file(f"{d}/moved")
            with self.assertRaises(FileNotFoundError):
                await fs._cat_file(f"{d}/moved")
            with self.assertRaises(FileNotFoundError):
                await fs._info(f"{d}/nope")
            await fs._rm(d, recursive=True)
            self.assertFalse(await fs._exists(d))

        asyncio.run(main())

    def test_parallel(self):
        # Calls from one event loop overlap: each runs on the pool, and the
        # client releases the GIL while waiting. 32 reads of an 8 MiB file,
        # each from its own coroutine, timed on the thread doing it: some
        # must start before the first one ends.
        async def main():
            fs = AsyncSluiceFileSystem(server=_env.SERVER, asynchronous=True, inflight=32)
            d = _env.fresh_dir(fs.client, "afp")
            await fs._pipe_file(f"{d}/x", rand(8 << 20, 5))
            # Start the pool's threads first, so that thread start-up does
            # not space the reads out.
            await asyncio.gather(*(fs._call(time.sleep, 0.01) for _ in range(32)))
            best = 0
            for _ in range(3):  # a serial pool never overlaps; a loaded VM may hide it once
                spans = []

                def timed():
                    # Timed on the pool's thread, around the client's call.
                    t0 = time.monotonic()
                    fs.sync.cat_file(f"{d}/x")
                    spans.append((t0, time.monotonic()))

                await asyncio.gather(*(fs._call(timed) for _ in range(32)))
                first_end = min(e for _, e in spans)
                best = max(best, sum(1 for s, _ in spans if s < first_end))
            self.assertGreater(best, 1, "no two reads were in flight at once")

        asyncio.run(main())

    def test_sync_mirror(self):
        fs = AsyncSluiceFileSystem(server=_env.SERVER)  # fsspec runs the coroutines on its loop
        d = _env.fresh_dir(fs.client, "afm")
        fs.pipe_file(f"{d}/a", b"hello")
        self.assertEqual(fs.cat_file(f"{d}/a"), b"hello")
        with fs.open(f"{d}/b", "wb") as f:
            f.write(b"world")
        self.assertEqual(fs.cat([f"{d}/a", f"{d}/b"]), {f"{d}/a": b"hello", f"{d}/b": b"world"})
        self.assertTrue(fs.exists(f"{d}/b"))


if __name__ == "__main__":
    unittest.main()
