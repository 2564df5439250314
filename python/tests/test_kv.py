"""The KV-cache store from Python against a real server: values of the
sizes inference servers offload, byte for byte, into every kind of buffer;
write-once puts; the longest stored prefix; deletes; errors as OSError with
the errno; and a store used again in a forked child."""

import errno
import os
import pickle
import random
import unittest
import uuid

import _env
import numpy as np
import torch

import sluice


def rand(n, seed):
    return random.Random(seed).randbytes(n)


class KVTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = _env.client()
        cls.name = "kv" + uuid.uuid4().hex[:8]
        cls.c.kv_create(cls.name, capacity=1 << 30)
        cls.kv = cls.c.kv(cls.name)

    def key(self, name):
        return f"{self.id()}/{name}"

    def test_put_get_byte_for_byte(self):
        # Sizes around the 1 MiB blocks a target may send unread.
        sizes = [1, 65536, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, (3 << 20) + 17, 16 << 20]
        keys = [self.key(f"v{n}") for n in sizes]
        vals = [rand(n, i) for i, n in enumerate(sizes)]
        self.assertEqual(self.kv.put(keys, vals), [True] * len(keys))
        got = self.kv.get(keys + [self.key("absent")], max_size=16 << 20)
        self.assertIsNone(got[-1])
        for k, v, g in zip(keys, vals, got):
            self.assertEqual(bytes(g), v, k)
        # Into numpy arrays and tensors, no copies on the way.
        arr = np.zeros(sizes[5], dtype=np.uint8)
        ten = torch.zeros(sizes[3], dtype=torch.uint8)
        self.assertEqual(self.kv.get_into([keys[5], keys[3]], [arr, ten]), [sizes[5], sizes[3]])
        self.assertEqual(arr.tobytes(), vals[5])
        self.assertEqual(bytes(ten.numpy()), vals[3])
        # From a tensor and a memoryview.
        src = torch.arange(0, 256, dtype=torch.uint8).repeat(4096)
        self.assertEqual(self.kv.put([self.key("t")], [src]), [True])
        self.assertEqual(bytes(self.kv.get([self.key("t")])[0]), bytes(src.numpy()))

    def test_write_once(self):
        k = self.key("once")
        self.assertEqual(self.kv.put([k], [b"first"]), [True])
        self.assertEqual(self.kv.put([k, self.key("other")], [b"second", b"x"]), [False, True])
        self.assertEqual(bytes(self.kv.get([k])[0]), b"first")

    def test_exists_and_delete(self):
        keys = [self.key(f"p{i}") for i in range(5)]
        self.kv.put(keys[:3], [b"a", b"b", b"c"])
        self.assertEqual(self.kv.exists(keys), 3)
        self.assertEqual(self.kv.exists(keys[3:]), 0)
        self.assertEqual(self.kv.delete([keys[1], keys[4]]), 1)
        self.assertEqual(self.kv.exists(keys), 1)
        self.assertEqual(self.kv.get([keys[1]]), [None])

    def test_errors(self):
        k = self.key("big")
        self.kv.put([k], [rand(1000, 7)])
        with self.assertRaises(OSError) as cm:
            self.kv.get_into([k], [bytearray(999)])
        self.assertEqual(cm.exception.errno, errno.ERANGE)
        with self.assertRaises(FileNotFoundError):
            self.c.kv("no-such-store-" + uuid.uuid4().hex[:6])
        with self.assertRaises(ValueError):
            self.kv.put(["a\0b"], [b"x"])
        with self.assertRaises(TypeError):
            self.kv.get_into([k], [b"read-only"])
        # Another configuration for an existing store is refused.
        with self.assertRaises(FileExistsError):
            self.c.kv_create(self.name, capacity=2 << 30)

    def test_fork_and_pickle(self):
        k = self.key("forked")
        v = rand(300000, 9)
        self.kv.put([k], [v])
        kv2 = pickle.loads(pickle.dumps(self.kv))
        self.assertEqual(bytes(kv2.get([k])[0]), v)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child uses the parent's store object
            ok = False
            try:
                ok = bytes(self.kv.get([k])[0]) == v and self.kv.put([k + "/child"], [b"c"]) == [True]
            finally:
                os.write(w, b"1" if ok else b"0")
                os._exit(0)
        os.close(w)
        self.assertEqual(os.read(r, 1), b"1", "the store did not work in a forked child")
        os.waitpid(pid, 0)
        self.assertEqual(bytes(self.kv.get([k + "/child"])[0]), b"c")


if __name__ == "__main__":
    unittest.main()
