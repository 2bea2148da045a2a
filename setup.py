"""Build the wheel: CMake builds libsublet.so, libsublet_torch.so and the
`sublet` command (Release, no tests or benchmarks), which are copied into the
package (sublet/libsublet.so, sublet/libsublet_torch.so, sublet/_bin/sublet, and
sublet/_bin/libsublet_nullgpu.so when the CUDA toolkit's headers are found);
the console script `sublet` (sublet._cli) runs the bundled command.
Metadata: pyproject.toml.  The CMake build folder: build/python-wheel (or
$SUBLET_WHEEL_BUILD_DIR).  Needs cmake, a C compiler, pkg-config and
zlib1g-dev (scripts/deps installs them)."""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))
BUNDLED = {"libsublet.so": "libsublet.so", "libsublet_torch.so": "libsublet_torch.so",
           "sublet": os.path.join("_bin", "sublet")}


class BuildWithCMake(build_py):
    def run(self):
        super().run()
        build = os.environ.get("SUBLET_WHEEL_BUILD_DIR") or os.path.join(ROOT, "build",
                                                                          "python-wheel")
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                               "-DSUBLET_BUILD_TESTS=OFF", "-DSUBLET_BUILD_BENCH=OFF",
                               "-DSUBLET_WERROR=OFF"])
        subprocess.check_call(["cmake", "--build", build, "-j%d" % (os.cpu_count() or 1),
                               "--target", "sublet_shared", "sublet_cli", "sublet_torch"])
        bundled = dict(BUNDLED)
        # the null device (`sublet nullgpu`), when the CUDA toolkit's headers were found:
        # beside the command, which makes the links to its other names at run time
        if subprocess.call(["cmake", "--build", build, "--target", "sublet_nullgpu"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
            bundled["libsublet_nullgpu.so"] = os.path.join("_bin", "libsublet_nullgpu.so")
        pkg = os.path.join(self.build_lib, "sublet")
        for src, dst in bundled.items():
            target = os.path.join(pkg, dst)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            # the file itself, not the symlink (libsublet.so -> .so.0 -> .so.0.1.0)
            shutil.copyfile(os.path.realpath(os.path.join(build, src)), target)
            shutil.copymode(os.path.realpath(os.path.join(build, src)), target)


class BinaryDistribution(Distribution):
    """A platform wheel: the package carries compiled code."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithCMake}, distclass=BinaryDistribution)
