"""Shared by tests/python/test_*.py (run by tests/cli_python.sh from a venv
where the wheel is installed): the committed traces and the CLI on PATH."""

import json
import os
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("SUBLET_TESTDATA") or os.path.join(HERE, "..", "data")
TRACES = sorted(
    f for f in os.listdir(DATA) if f.endswith((".csv", ".gz", ".json", ".pickle"))
)


def data(name):
    return os.path.join(DATA, name)


@pytest.fixture(scope="session")
def cli():
    path = shutil.which("sublet")
    assert path, "the sublet command is not on PATH"
    return path


def run_json(cli, *args):
    """`sublet ARGS --json`, parsed."""
    out = subprocess.run([cli, *args, "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)
