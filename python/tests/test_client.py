"""The native client against a real server: bytes read back exactly, into
every kind of buffer, errors as the standard exceptions, batches, file sets,
the GIL released during calls, and fork safety."""

import errno
import io
import os
import pickle
import random
import threading
import time
import unittest

import _env
import numpy as np
import torch

import sluice


def rand(n, seed):
    return random.Random(seed).randbytes(n)


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = _env.client()

    def setUp(self):
        self.d = _env.fresh_dir(self.c)

    def p(self, name):
        return self.d + "/" + name

    def test_files_byte_for_byte(self):
        # Sizes around 64 KiB blocks and the write-back buffer (8 MiB).
        for i, n in enumerate([0, 1, 65535, 65536, 65537, 1 << 20, (8 << 20) + 3]):
            data = rand(n, i)
            with self.c.open(self.p(f"f{i}"), "wb") as f:
                # Unaligned pieces through the buffered writer.
                off = 0
                while off < n:
                    k = random.Random(off).randint(1, 3 << 20)
                    f.write(data[off:off + k])
                    off += k
            self.assertEqual(self.c.stat(self.p(f"f{i}")).st_size, n)
            self.assertEqual(self.c.read_bytes(self.p(f"f{i}")), data, f"size {n}")
            with self.c.open(self.p(f"f{i}"), "rb") as f:
                self.assertEqual(f.read(), data)
                if n > 10:
                    f.seek(n // 2)
                    self.assertEqual(f.read(10), data[n // 2:n // 2 + 10])
                    f.seek(-5, io.SEEK_END)
                    self.assertEqual(f.read(), data[-5:])

    def test_modes(self):
        p = self.p("m")
        with self.c.open(p, "w") as f:
            f.write("héllo\n")
        with self.c.open(p, "a") as f:
            f.write("world\n")
        with self.c.open(p) as f:
            self.assertEqual(f.read(), "héllo\nworld\n")
        with self.c.open(p, "r+b") as f:
            f.seek(1)
            f.write(b"E")
            f.seek(0)
            self.assertEqual(f.read(3), b"hE\xa9")
        with self.assertRaises(FileExistsError):
            self.c.open(p, "xb")
        with self.c.open(p, "wb") as f:
            pass
        self.assertEqual(self.c.stat(p).st_size, 0)
        with self.c.open(p, "wb", buffering=0) as f:
            self.assertIsInstance(f, sluice.File)
            self.assertEqual(f.pwrite(b"abcdef", 10), 6)
            f.truncate(12)
            f.fsync()
        self.assertEqual(self.c.read_bytes(p), b"\0" * 10 + b"ab")

    def test_readinto_any_buffer(self):
        data = rand(1 << 20, 7)
        p = self.p("b")
        self.c.write_bytes(p, data)
        with self.c.open(p, "rb", buffering=0) as f:
            ba = bytearray(1000)
            self.assertEqual(f.readinto(ba), 1000)
            self.assertEqual(ba, data[:1000])
            mv = memoryview(bytearray(3000))[1000:2000]  # a slice
            self.assertEqual(f.pread_into(mv, 5), 1000)
            self.assertEqual(mv.tobytes(), data[5:1005])
            arr = np.zeros((256, 256), dtype=np.float32)  # 2-D, 256 KiB
            self.assertEqual(f.pread_into(arr, 0), arr.nbytes)
            self.assertEqual(arr.tobytes(), data[:arr.nbytes])
            t = torch.zeros(1 << 18, dtype=torch.int32)  # a tensor: no buffer protocol
            self.assertEqual(f.pread_into(t, 0), 1 << 20)
            self.assertEqual(t.numpy().tobytes(), data)
            with self.assertRaises(TypeError):
                f.pread_into(b"read-only", 0)
            with self.assertRaises(ValueError):
                f.pread_into(np.zeros((4, 4))[:, 1], 0)  # not contiguous
        # Writes from any buffer, including read-only views.
        with self.c.open(self.p("w"), "wb", buffering=0) as f:
            f.write(memoryview(data)[10:20])
            f.write(np.frombuffer(data[20:30], dtype=np.uint8))
            f.write(torch.frombuffer(bytearray(data[30:40]), dtype=torch.uint8))
        self.assertEqual(self.c.read_bytes(self.p("w")), data[10:40])

    def test_errors_are_standard_exceptions(self):
        c = self.c
        with self.assertRaises(FileNotFoundError) as cm:
            c.stat(self.p("nope"))
        self.assertEqual(cm.exception.errno, errno.ENOENT)
        self.assertIn("nope", str(cm.exception))
        with self.assertRaises(FileNotFoundError):
            c.open(self.p("nope"), "rb")
        c.mkdir(self.p("dir"))
        with self.assertRaises(FileExistsError):
            c.mkdir(self.p("dir"))
        c.mkdir(self.p("dir"), exist_ok=True)
        with self.assertRaises(IsADirectoryError):
            c.open(self.p("dir"), "rb")
        with self.assertRaises(IsADirectoryError):
            c.unlink(self.p("dir"))
        c.write_bytes(self.p("dir/x"), b"x")
        with self.assertRaises(OSError) as cm:
            c.rmdir(self.p("dir"))
        self.assertEqual(cm.exception.errno, errno.ENOTEMPTY)
        with self.assertRaises(NotADirectoryError):
            c.rmdir(self.p("dir/x"))
        with self.assertRaises(NotADirectoryError):
            c.listdir(self.p("dir/x"))
        c.write_bytes(self.p("y"), b"y")
        with self.assertRaises(FileExistsError):
            c.rename(self.p("y"), self.p("dir/x"), replace=False)
        c.rename(self.p("y"), self.p("dir/x"))
        self.assertEqual(c.read_bytes(self.p("dir/x")), b"y")
        f = c.open(self.p("dir/x"), "rb", buffering=0)
        f.close()
        with self.assertRaises(ValueError):
            f.read()
        with self.assertRaises(OSError):  # a file opened for writing only
            with c.open(self.p("dir/x"), "ab", buffering=0) as f:
                f.read(1)

    def test_namespace(self):
        c = self.c
        c.mkdir(self.p("a/b/c"), parents=True)
        c.write_bytes(self.p("a/f1"), b"12345")
        c.write_bytes(self.p("a/f0"), b"")
        self.assertEqual(c.listdir(self.p("a")), ["b", "f0", "f1"])
        es = {e.name: e for e in c.scandir(self.p("a"))}
        self.assertTrue(es["b"].is_dir())
        self.assertTrue(es["f1"].is_file())
        self.assertEqual(es["f1"].size, 5)
        self.assertEqual(es["f1"].path, self.p("a/f1"))
        self.assertGreater(es["f1"].mtime_ns, 0)
        st = c.stat(self.p("a/f1"))
        self.assertTrue(st.is_file and not st.is_dir)
        self.assertEqual(st.st_mtime_ns, es["f1"].mtime_ns)
        c.truncate(self.p("a/f1"), 2)
        self.assertEqual(c.read_bytes(self.p("a/f1")), b"12")
        c.rename(self.p("a"), self.p("z"))
        self.assertFalse(c.exists(self.p("a")))
        self.assertTrue(c.isdir(self.p("z/b/c")))
        c.rmtree(self.p("z"))
        self.assertFalse(c.exists(self.p("z")))
        c.rmtree(self.p("z"), missing_ok=True)
        with self.assertRaises(FileNotFoundError):
            c.rmtree(self.p("z"))

    def test_read_batch(self):
        files = {self.p(f"s{i:03d}"): rand(random.Random(i).randint(0, 300_000), i) for i in range(100)}
        self.c.write_batch(list(files.items()))
        paths = sorted(files)
        got = self.c.read_batch(paths, inflight=16)
        self.assertEqual([bytes(g) for g in got], [files[p] for p in paths])
        reqs = [(p, 3, 100) for p in paths[:10]] + [(paths[-1], len(files[paths[-1]]) - 1, 50)]
        got = self.c.read_batch(reqs)
        for (p, off, n), g in zip(reqs, got):
            self.assertEqual(bytes(g), files[p][off:off + n])
        # Errors: raised after all finished, or returned in place.
        with self.assertRaises(FileNotFoundError):
            self.c.read_batch([paths[0], self.p("missing")])
        got = self.c.read_batch([paths[0], self.p("missing"), (self.p("missing2"), 0, 1)], errors="return")
        self.assertEqual(got[0], files[paths[0]])
        self.assertIsInstance(got[1], FileNotFoundError)
        self.assertIsInstance(got[2], FileNotFoundError)
        # Straight into caller buffers: one numpy array holding many samples.
        sizes = [len(files[p]) for p in paths]
        arena = np.zeros(sum(sizes), dtype=np.uint8)
        views, off = [], 0
        for s in sizes:
            views.append(arena[off:off + s])
            off += s
        n = self.c.read_batch_into([(p, 0, s) for p, s in zip(paths, sizes)], views)
        self.assertEqual(n, sizes)
        self.assertEqual(arena.tobytes(), b"".join(files[p] for p in paths))
        self.assertEqual(sluice.read_batch(self.c, paths[:3]), [files[p] for p in paths[:3]])

    def test_fileset(self):
        files = {self.p(f"x/{i:03d}.bin"): rand(1000 + i, i) for i in range(40)}
        self.c.mkdir(self.p("x"))
        self.c.write_batch(list(files.items()))
        self.c.mkdir(self.p("x/sub"))
        self.c.write_bytes(self.p("x/sub/deep"), b"deep")
        with self.c.fileset(root=self.p("x")) as fs:
            want = sorted(list(files) + [self.p("x/sub/deep")])
            self.assertEqual(fs.paths, want)
            self.assertEqual(fs.sizes[:40], [len(files[p]) for p in want[:40]])
            self.assertEqual(fs.read(range(len(fs)))[:40], [files[p] for p in want[:40]])
            self.assertTrue(all(i > 0 for i in fs.inos))
            # A copy (pickled, as for a spawned worker) opens the paths again.
            fs2 = pickle.loads(pickle.dumps(fs))
            self.assertEqual(fs2.read([3, 40]), [files[want[3]], b"deep"])
            fs2.close()
        with self.c.fileset(sorted(files)[:5] + [self.p("x/missing")], errors="return") as fs:
            self.assertEqual(fs.sizes[5], -1)
            self.assertEqual(fs.read([0, 4]), [files[sorted(files)[0]], files[sorted(files)[4]]])
            with self.assertRaises(FileNotFoundError):
                fs.read_into([5], [bytearray(1)])
        with self.assertRaises(FileNotFoundError):
            self.c.fileset([self.p("x/missing")])

    def test_gil_released(self):
        data = rand(48 << 20, 11)
        self.c.write_bytes(self.p("big"), data)
        counted = [0]
        done = threading.Event()

        def spin():
            while not done.is_set():
                counted[0] += 1

        t = threading.Thread(target=spin)
        t.start()
        time.sleep(0.05)
        before = counted[0]
        start = time.monotonic()
        got = self.c.read_bytes(self.p("big"))
        took = time.monotonic() - start
        during = counted[0] - before
        done.set()
        t.join()
        self.assertEqual(got, data)
        # A thread holding the GIL for the whole read would let the other
        # one count only at the few Python steps around the call.
        self.assertGreater(during, 1000, f"the spinning thread counted {during} in {took:.3f}s of read")

    def test_threads_in_parallel(self):
        files = {self.p(f"t{i}"): rand(200_000, i) for i in range(32)}
        self.c.write_batch(list(files.items()))
        errs = []

        def work(k):
            try:
                for p in list(files)[k::4]:
                    if self.c.read_bytes(p) != files[p]:
                        errs.append(p)
            except Exception as e:  # noqa: BLE001
                errs.append(e)

        ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        self.assertEqual(errs, [])


def _wait(pid, seconds=60):
    """Exit status of child pid, or None if it did not exit in time (hung:
    killed)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        p, status = os.waitpid(pid, os.WNOHANG)
        if p == pid:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return None


class ForkTest(unittest.TestCase):
    """A forked child (a DataLoader worker) gets its own connection and
    runtime; nothing of the parent's is ever called there."""

    def test_fork(self):
        c = _env.client()
        d = _env.fresh_dir(c, "fork")
        data = rand(500_000, 1)
        c.write_bytes(d + "/f", data)
        f = c.open(d + "/f", "rb", buffering=0)
        fs = c.fileset([d + "/f"])
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                # The parent's file: refused at once, with a clear error.
                try:
                    f.pread(10, 0)
                    code = 10
                except sluice.ForkError as e:
                    if e.errno != errno.EBADF or "fork" not in str(e):
                        code = 11
                f.close()  # forgets it; must not call the parent's runtime
                # The parent's client and file set: usable, on a new connection.
                if c.read_bytes(d + "/f") != data:
                    code = 12
                if fs.read([0])[0] != data:
                    code = 13
                c.write_bytes(d + "/child", b"from the child")
                # A grandchild too.
                gp = os.fork()
                if gp == 0:
                    os._exit(0 if c.read_bytes(d + "/child") == b"from the child" else 1)
                if _wait(gp) != 0:
                    code = 14
            except BaseException as e:  # noqa: BLE001
                print("child:", repr(e), flush=True)
                code = 20
            os._exit(code)
        status = _wait(pid)
        self.assertEqual(status, 0, "the child hung" if status is None else f"the child failed: {status}")
        # The parent's handles are intact.
        self.assertEqual(f.pread(10, 5), data[5:15])
        self.assertEqual(fs.read([0])[0], data)
        self.assertEqual(c.read_bytes(d + "/child"), b"from the child")
        f.close()
        fs.close()

    def test_pool_of_forked_workers(self):
        import multiprocessing as mp

        c = _env.client()
        d = _env.fresh_dir(c, "pool")
        files = {f"{d}/{i}": rand(50_000, i) for i in range(16)}
        c.write_batch(list(files.items()))
        global _POOL_CLIENT
        _POOL_CLIENT = c
        with mp.get_context("fork").Pool(4) as pool:
            got = pool.map(_read_in_worker, sorted(files), chunksize=1)
        self.assertEqual(got, [files[p] for p in sorted(files)])


_POOL_CLIENT = None


def _read_in_worker(p):
    return bytes(_POOL_CLIENT.read_bytes(p))


if __name__ == "__main__":
    unittest.main()
