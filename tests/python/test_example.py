"""examples/analyst_notebook.py runs with plain Python and prints the settings
the tuning found (the same as sublet.tune's)."""

import os
import subprocess
import sys

import sublet
from conftest import HERE, data

EXAMPLE = os.path.join(HERE, "..", "..", "examples", "analyst_notebook.py")


def test_notebook_example_runs(tmp_path):
    out = subprocess.run([sys.executable, EXAMPLE, str(tmp_path)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    best = sublet.tune(data("cs336_attention_microbench.pickle.gz"))
    assert "export PYTORCH_CUDA_ALLOC_CONF=%s\n" % best.pytorch_conf in out.stdout
    assert "export SUBLET_ALLOC_CONF=%s " % best.sublet_conf in out.stdout
    # the trace as the example names it
    trace = os.path.join(os.path.dirname(os.path.abspath(EXAMPLE)), "..", "tests", "data",
                         "cs336_attention_microbench.pickle.gz")
    assert (tmp_path / "cs336_report.html").read_text() == sublet.report(trace).html
