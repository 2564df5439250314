"""Run by test/python (TestAbsorbKill), not by unittest: a DCP checkpoint
writer staging through $SLUICE_STAGING_DIR.

absorb_kill.py write DIR SEED [stop]
    saves a model made from SEED to DIR with sluice.dcp.StorageWriter and
    prints "SHARD path sha256 size" for each shard it wrote. With "stop" it
    prints STAGED once the shards are acknowledged (written and synced to
    the staging area) and blocks before the commit, until killed; else it
    commits, waits for the drain and prints "STATS {json}".
absorb_kill.py replay
    a new client on the same staging directory (it adopts what a killed
    one left), waits for the drain and prints "STATS {json}".
absorb_kill.py check DIR SEED
    loads DIR through a client without staging and checks every tensor
    against the model made from SEED; prints OK.
"""

import hashlib
import json
import os
import sys
import time
import warnings

import _env
import torch

import sluice.dcp

warnings.filterwarnings("ignore", category=UserWarning)


def model_state(seed: int) -> dict:
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512))
    return m.state_dict()


class Writer(sluice.dcp.StorageWriter):
    """The package's writer, telling what it wrote and stopping before the
    commit when asked."""

    stop = False

    def _flush(self, files):
        for path, data in files:
            print("SHARD", path, hashlib.sha256(data).hexdigest(), len(data), flush=True)
        super()._flush(files)

    def finish(self, metadata, results):
        if self.stop:
            print("STAGED", flush=True)
            while True:
                time.sleep(60)  # until killed
        super().finish(metadata, results)


def main() -> int:
    staging = os.environ["SLUICE_STAGING_DIR"]
    mode = sys.argv[1]
    dcp = sluice.dcp.checkpoint_module()
    if mode == "write":
        path, seed = sys.argv[2], int(sys.argv[3])
        c = _env.client(staging_dir=staging)
        w = Writer(path, c)
        w.stop = len(sys.argv) > 4 and sys.argv[4] == "stop"
        dcp.save_state_dict(model_state(seed), w, no_dist=True)
        c.wait_staged()
        print("STATS", json.dumps(c.staging_stats()), flush=True)
        c.close()
    elif mode == "replay":
        c = _env.client(staging_dir=staging)
        c.wait_staged()
        print("STATS", json.dumps(c.staging_stats()), flush=True)
        c.close()
    elif mode == "check":
        path, seed = sys.argv[2], int(sys.argv[3])
        want = model_state(seed)
        got = model_state(seed + 1000)
        c = _env.client()
        dcp.load_state_dict(got, sluice.dcp.StorageReader(path, c), no_dist=True)
        for k in want:
            if not torch.equal(want[k], got[k]):
                print("DIFFERENT", k, flush=True)
                return 1
        print("OK", flush=True)
    else:
        print("unknown mode", mode, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
