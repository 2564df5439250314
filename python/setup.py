"""Builds the wheel (metadata in pyproject.toml). The wheel carries
_libsluice.so, built first by `make python`; it does not use the CPython ABI
(ctypes loads it), so it is tagged py3-none-<platform>."""

import os

from setuptools import setup
from setuptools.dist import Distribution

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no wheel package: sdist and in-place use still work
    bdist_wheel = None

if not os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "sluice", "_libsluice.so")):
    raise SystemExit("sluice/_libsluice.so is missing: build it first with `make python` from the repository root")

class BinaryDistribution(Distribution):
    """Holds a platform library: installed into platlib, wheel not pure."""

    def has_ext_modules(self):
        return True


cmdclass = {}
if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        def get_tag(self):
            return ("py3", "none") + (super().get_tag()[2],)

    cmdclass["bdist_wheel"] = PlatformWheel

setup(cmdclass=cmdclass, distclass=BinaryDistribution)
