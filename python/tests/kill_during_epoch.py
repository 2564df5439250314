"""Run by test/python (TestServerKilledDuringEpoch), not by unittest: reads
the first batches of a DataLoader epoch, prints READY, waits until the Go
test has killed the server with SIGKILL (a line on stdin), and checks that
the rest of the epoch fails with an OSError within the client's timeout
instead of hanging. Usage: kill_during_epoch.py WORKERS"""

import random
import sys
import time

import _env
from torch.utils.data import DataLoader

from sluice.data import FileDataset

TIMEOUT = 5.0


def keep(batch):
    return batch


def main() -> int:
    workers = int(sys.argv[1])
    c = _env.client(timeout=TIMEOUT)
    d = _env.fresh_dir(c, f"kill{workers}")
    c.write_batch([(f"{d}/{i:03d}", random.Random(i).randbytes(4096)) for i in range(200)])
    ds = FileDataset(d, client=c)
    it = iter(DataLoader(ds, batch_size=4, num_workers=workers, collate_fn=keep))
    next(it)
    next(it)
    print("READY", flush=True)
    sys.stdin.readline()
    start = time.monotonic()
    try:
        n = sum(1 for _ in it)
    except OSError as e:
        took = time.monotonic() - start
        print(f"RAISED {type(e).__name__} after {took:.1f}s: {e}", flush=True)
        return 0 if took < 3 * TIMEOUT else 3
    except Exception as e:  # noqa: BLE001
        print(f"FAIL: not an OSError: {type(e).__name__}: {e}", flush=True)
        return 2
    print(f"FAIL: {n} more batches read after the server was killed", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
