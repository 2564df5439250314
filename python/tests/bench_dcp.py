"""Run by test/python's BenchmarkDCP, not by unittest: times
torch.distributed.checkpoint save and load of one state dict (float32
tensors) through sluice.dcp's StorageWriter/StorageReader on the native
client, through torch's FileSystemWriter/FileSystemReader on the mount and
on a local directory. Rounds are interleaved; before each load the page
cache of the files involved is dropped (posix_fadvise DONTNEED on the
checkpoint files, the server's data directory), so loads are cold. Every
load is compared with what was saved. Prints one line
RESULT {"method": {"save": [s...], "load": [s...]}, "bytes": N}.

With --staging DIR --absorb SLUICEDIR it also saves through a client
staging in DIR under SLUICEDIR (which has the absorb policy): "save" is
then the stall (the save returns once the shards are staged), "drain" the
wait for them to reach the targets after it.

Usage: bench_dcp.py --size BYTES --tensor BYTES --drop DIR [--mount DIR]
       [--local DIR] [--staging DIR --absorb SLUICEDIR] [--rounds 3]
"""

import argparse
import json
import os
import shutil
import time
import urllib.request
import uuid

import _env
import torch

import sluice.dcp
from bench_samples import drop_caches


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--tensor", type=int, required=True)
    ap.add_argument("--drop", action="append", default=[])
    ap.add_argument("--mount")
    ap.add_argument("--local")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--staging", help="a staging directory: also save through a client staging there")
    ap.add_argument("--absorb", help="a directory with the absorb policy, for --staging")
    ap.add_argument("--mount-staged", help="a directory with the absorb policy on a mount that stages")
    ap.add_argument("--mount-metrics", help="that mount's admin address (host:port), to wait for its drain")
    a = ap.parse_args()

    dcp = sluice.dcp.checkpoint_module()
    c = _env.client()
    n = max(a.size // a.tensor, 1)
    g = torch.Generator().manual_seed(7)
    state = {f"layer{i}.weight": torch.rand(a.tensor // 4, generator=g) for i in range(n)}
    total = sum(t.numel() * t.element_size() for t in state.values())

    def empty():
        return {k: torch.empty_like(v) for k, v in state.items()}

    def check(got, what):
        for k, v in state.items():
            if not torch.equal(got[k], v):
                raise SystemExit(f"{what}: tensor {k} differs after the load")

    methods = {}

    def native(root):
        def save():
            dcp.save_state_dict(state, sluice.dcp.StorageWriter(root, c), no_dist=True)

        def load():
            sd = empty()
            dcp.load_state_dict(sd, sluice.dcp.StorageReader(root, c), no_dist=True)
            return sd
        return save, load, []

    def posix(root):
        def save():
            dcp.save_state_dict(state, dcp.FileSystemWriter(root), no_dist=True)

        def load():
            sd = empty()
            dcp.load_state_dict(sd, dcp.FileSystemReader(root), no_dist=True)
            return sd
        return save, load, [root]

    targets = [("native", lambda tag: native(f"/dcp-{tag}"))]
    staged_client = None
    if a.staging and a.absorb:
        # Saved through staging: the save returns once the shards are
        # staged (the stall); the drain is waited for, untimed in the save,
        # before the load (through the plain client).
        staged_client = _env.client(staging_dir=a.staging)

        def staged(root):
            def save():
                dcp.save_state_dict(state, sluice.dcp.StorageWriter(root, staged_client), no_dist=True)

            def load():
                sd = empty()
                dcp.load_state_dict(sd, sluice.dcp.StorageReader(root, c), no_dist=True)
                return sd
            return save, load, []
        targets.append(("staged", lambda tag: staged(f"{a.absorb}/dcp-{tag}")))
    if a.mount:
        targets.append(("mount", lambda tag: posix(os.path.join(a.mount, f"dcp-m-{tag}"))))
    if a.local:
        targets.append(("local", lambda tag: posix(os.path.join(a.local, f"dcp-l-{tag}"))))

    if a.mount_staged:
        targets.append(("mountstaged", lambda tag: posix(os.path.join(a.mount_staged, f"dcp-ms-{tag}"))))

    def mount_held():
        page = urllib.request.urlopen(f"http://{a.mount_metrics}/metrics", timeout=10).read().decode()
        for line in page.splitlines():
            if line.startswith("sluice_absorb_held_bytes "):
                return float(line.split()[1])
        raise SystemExit("the mount exports no sluice_absorb_held_bytes")

    for r in range(a.rounds):
        order = targets[r % len(targets):] + targets[:r % len(targets)]
        for name, make in order:
            tag = uuid.uuid4().hex[:8]
            save, load, dirs = make(tag)
            t = time.perf_counter()
            save()
            ts = time.perf_counter() - t
            drain = 0.0
            if name == "staged":
                t = time.perf_counter()
                staged_client.wait_staged()
                drain = time.perf_counter() - t
            if name == "mountstaged" and a.mount_metrics:
                t = time.perf_counter()
                while mount_held() > 0:
                    time.sleep(0.01)
                drain = time.perf_counter() - t
            drop_caches(dirs + a.drop)
            t = time.perf_counter()
            got = load()
            tl = time.perf_counter() - t
            check(got, name)
            m = methods.setdefault(name, {"save": [], "load": [], "drain": []})
            m["save"].append(ts)
            m["load"].append(tl)
            m["drain"].append(drain)
            for d in dirs:
                shutil.rmtree(d, ignore_errors=True)
            if name == "native":
                c.rmtree(f"/dcp-{tag}")
            if name == "staged":
                c.rmtree(f"{a.absorb}/dcp-{tag}")
    print("RESULT " + json.dumps({"methods": methods, "bytes": total}), flush=True)


if __name__ == "__main__":
    main()
