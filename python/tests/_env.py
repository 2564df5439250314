"""Shared set-up of the Python tests: the server comes from $SLUICE_SERVER
(test/python starts a real `sluice serve` and sets it), the library from
$SLUICE_LIB, and each test works in its own directory."""

import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import sluice  # noqa: E402

SERVER = os.environ.get("SLUICE_SERVER", "127.0.0.1:9400")


def client(**kwargs):
    return sluice.Client(SERVER, **kwargs)


def fresh_dir(c, name="t"):
    d = f"/{name}-{uuid.uuid4().hex[:8]}"
    c.mkdir(d)
    return d
