"""The "sluice" fsspec file system on the basics every fsspec user relies
on, against a real server."""

import os
import pickle
import random
import tempfile
import unittest

import _env
import fsspec

import sluice  # noqa: F401  (registers the protocol)
from sluice.filesystem import SluiceFileSystem


def rand(n, seed):
    return random.Random(seed).randbytes(n)


class FsspecTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fs = fsspec.filesystem("sluice", server=_env.SERVER)

    def setUp(self):
        self.d = _env.fresh_dir(self.fs.client, "fss")

    def p(self, name):
        return self.d + "/" + name

    def test_registered(self):
        self.assertIsInstance(self.fs, SluiceFileSystem)
        self.assertIs(fsspec.filesystem("sluice", server=_env.SERVER), self.fs)  # fsspec's instance cache
        fs, path = fsspec.core.url_to_fs(f"sluice://{_env.SERVER}/a/b")
        self.assertEqual(path, "/a/b")
        self.assertEqual(fs.client.server, _env.SERVER)
        self.assertEqual(SluiceFileSystem._strip_protocol("sluice:///x/y/"), "/x/y")
        self.assertEqual(SluiceFileSystem._strip_protocol("x//y"), "/x/y")
        self.assertEqual(self.fs.unstrip_protocol("/q"), f"sluice://{_env.SERVER}/q")

    def test_write_read(self):
        data = rand(3 << 20, 1)
        with self.fs.open(self.p("a.bin"), "wb", block_size=1 << 20) as f:
            f.write(data[:100])
            f.write(data[100:])
        self.assertEqual(self.fs.cat(self.p("a.bin")), data)
        self.assertEqual(self.fs.cat_file(self.p("a.bin"), 10, 20), data[10:20])
        self.assertEqual(self.fs.cat_file(self.p("a.bin"), -10), data[-10:])
        with self.fs.open(self.p("a.bin"), "rb") as f:
            self.assertEqual(f.size, len(data))
            f.seek(1 << 20)
            self.assertEqual(f.read(5), data[1 << 20:(1 << 20) + 5])
            buf = bytearray(8 << 20)
            f.seek(0)
            self.assertEqual(f.readinto(buf), len(data))
            self.assertEqual(buf[:len(data)], data)
        with self.fs.open(self.p("a.bin"), "ab") as f:
            f.write(b"tail")
        self.assertEqual(self.fs.cat(self.p("a.bin")), data + b"tail")
        with fsspec.open(f"sluice://{_env.SERVER}{self.p('t.txt')}", "w") as f:
            f.write("line 1\nline 2\n")
        with fsspec.open(f"sluice://{_env.SERVER}{self.p('t.txt')}", "r") as f:
            self.assertEqual(f.readlines(), ["line 1\n", "line 2\n"])
        self.fs.pipe_file(self.p("p"), b"piped")
        self.assertEqual(self.fs.cat_file(self.p("p")), b"piped")
        with self.fs.open(self.p("empty"), "wb"):
            pass
        self.assertEqual(self.fs.info(self.p("empty"))["size"], 0)
        with self.assertRaises(FileExistsError):
            self.fs.open(self.p("empty"), "xb")

    def test_ls_info_walk(self):
        self.fs.mkdir(self.p("a/b"))
        self.fs.pipe_file(self.p("a/1"), b"1")
        self.fs.pipe_file(self.p("a/b/2"), b"22")
        self.assertEqual(self.fs.ls(self.p("a"), detail=False), [self.p("a/1"), self.p("a/b")])
        info = {e["name"]: e for e in self.fs.ls(self.p("a"))}
        self.assertEqual(info[self.p("a/1")]["type"], "file")
        self.assertEqual(info[self.p("a/1")]["size"], 1)
        self.assertEqual(info[self.p("a/b")]["type"], "directory")
        self.assertEqual(self.fs.info(self.p("a/b/2"))["size"], 2)
        self.assertEqual(self.fs.ls(self.p("a/1"), detail=False), [self.p("a/1")])
        self.assertTrue(self.fs.exists(self.p("a/b/2")))
        self.assertTrue(self.fs.isdir(self.p("a/b")))
        self.assertTrue(self.fs.isfile(self.p("a/1")))
        self.assertFalse(self.fs.exists(self.p("nope")))
        with self.assertRaises(FileNotFoundError):
            self.fs.info(self.p("nope"))
        self.assertEqual(self.fs.find(self.p("a")), [self.p("a/1"), self.p("a/b/2")])
        self.assertEqual(self.fs.glob(self.p("a/*")), [self.p("a/1"), self.p("a/b")])
        self.assertEqual(self.fs.du(self.p("a")), 3)
        walked = list(self.fs.walk(self.p("a")))
        self.assertEqual(walked[0], (self.p("a"), ["b"], ["1"]))
        self.assertGreater(self.fs.modified(self.p("a/1")).year, 2000)
        self.assertNotEqual(self.fs.ukey(self.p("a/1")), self.fs.ukey(self.p("a/b/2")))

    def test_cat_many_and_ranges(self):
        files = {self.p(f"r{i}"): rand(10_000 + i, i) for i in range(30)}
        self.fs.client.write_batch(list(files.items()))
        got = self.fs.cat(self.p("r*"))
        self.assertEqual(got, files)
        paths = sorted(files)
        starts = [i for i in range(len(paths))]
        ends = [i + 100 for i in range(len(paths))]
        out = self.fs.cat_ranges(paths, starts, ends)
        self.assertEqual(out, [files[p][s:e] for p, s, e in zip(paths, starts, ends)])
        out = self.fs.cat_ranges(paths[:2], [-10, 5], [None, -5])
        self.assertEqual(out, [files[paths[0]][-10:], files[paths[1]][5:-5]])
        out = self.fs.cat_ranges([paths[0], self.p("nope")], 0, 10)
        self.assertEqual(out[0], files[paths[0]][:10])
        self.assertIsInstance(out[1], FileNotFoundError)
        self.assertEqual(self.fs.cat([paths[0], self.p("nope")], on_error="omit"), {paths[0]: files[paths[0]]})

    def test_mv_rm_mkdir(self):
        fs = self.fs
        fs.makedirs(self.p("x/y"))
        fs.makedirs(self.p("x/y"), exist_ok=True)
        with self.assertRaises(FileExistsError):
            fs.makedirs(self.p("x/y"))
        fs.pipe_file(self.p("x/y/f"), b"f")
        fs.mv(self.p("x/y/f"), self.p("x/g"))
        self.assertEqual(fs.cat(self.p("x/g")), b"f")
        self.assertFalse(fs.exists(self.p("x/y/f")))
        fs.mv(self.p("x/g"), self.p("x/y"))  # into a directory
        self.assertTrue(fs.exists(self.p("x/y/g")))
        fs.mv(self.p("x"), self.p("x2"), recursive=True)
        self.assertTrue(fs.exists(self.p("x2/y/g")))
        fs.copy(self.p("x2/y/g"), self.p("copy"))
        self.assertEqual(fs.cat(self.p("copy")), b"f")
        fs.rm(self.p("copy"))
        self.assertFalse(fs.exists(self.p("copy")))
        with self.assertRaises(OSError):
            fs.rmdir(self.p("x2"))  # not empty
        fs.rm(self.p("x2"), recursive=True)
        self.assertFalse(fs.exists(self.p("x2")))
        fs.mkdir(self.p("m"))
        fs.rmdir(self.p("m"))
        fs.touch(self.p("t"))
        self.assertEqual(fs.info(self.p("t"))["size"], 0)

    def test_get_put_pickle_transaction(self):
        data = rand(100_000, 5)
        with tempfile.TemporaryDirectory() as tmp:
            local = os.path.join(tmp, "l")
            with open(local, "wb") as f:
                f.write(data)
            self.fs.put(local, self.p("up"))
            self.fs.get(self.p("up"), os.path.join(tmp, "down"))
            with open(os.path.join(tmp, "down"), "rb") as f:
                self.assertEqual(f.read(), data)
        fs2 = pickle.loads(pickle.dumps(self.fs))
        self.assertEqual(fs2.cat(self.p("up")), data)
        with self.fs.transaction:
            with self.fs.open(self.p("tx"), "wb") as f:
                f.write(b"committed at the end")
            self.assertFalse(self.fs.exists(self.p("tx")))
        self.assertEqual(self.fs.cat(self.p("tx")), b"committed at the end")


if __name__ == "__main__":
    unittest.main()
