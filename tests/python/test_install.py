"""The installed package: the CLI on PATH, the bundled libraries."""

import os
import subprocess

import sublet
import sublet.torch


def test_cli_on_path(cli):
    out = subprocess.run([cli, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "sublet " + sublet.__version__


def test_bundled_library_first():
    pkg = os.path.dirname(os.path.abspath(sublet.__file__))
    assert "SUBLET_LIBRARY" not in os.environ
    assert sublet.library_path() == os.path.join(pkg, "libsublet.so")
    assert os.path.isfile(sublet.library_path())


def test_torch_uses_the_same_loader(monkeypatch):
    pkg = os.path.dirname(os.path.abspath(sublet.__file__))
    monkeypatch.delenv("SUBLET_TORCH_LIB", raising=False)
    assert sublet.torch.find_library() == os.path.join(pkg, "libsublet_torch.so")
    lib = sublet.torch.load_library()
    assert lib.version() == sublet.__version__
