# %% [markdown]
# # sublet's analyst from Python
#
# A notebook in plain Python (`# %%` cells: VS Code, Jupyter's jupytext and
# Spyder run them as cells; `python examples/analyst_notebook.py` runs them
# all).  It loads a recorded PyTorch run, shows the report, tunes the
# allocator's settings and prints the ones to use.  Every number comes from
# sublet's C library (`pip install .` bundles it).
#
# The trace: a PyTorch memory snapshot (`torch.cuda.memory._snapshot()`,
# pickled and gzip'd) of a small attention benchmark, committed in tests/data.
# A dict straight from `torch.cuda.memory._snapshot()` works the same.

# %%
import os
import sys

import sublet

here = os.path.dirname(os.path.abspath(__file__))
trace_path = os.path.join(here, "..", "tests", "data", "cs336_attention_microbench.pickle.gz")
out_dir = sys.argv[1] if len(sys.argv) > 1 else os.getcwd()

trace = sublet.load(trace_path)
print(trace)

# %% [markdown]
# ## The run replayed on a simulated 80 GiB GPU

# %%
r = sublet.replay(trace)
gib = 1 << 30
print("peak reserved: %.2f GiB, peak requested: %.2f GiB, OOMs: %d" %
      (r.peak_reserved_bytes / gib, r.peak_requested_bytes / gib, r.ooms))
print("decisions as PyTorch made them: %d of %d" %
      (r.fidelity["decisions_matched"], r.fidelity["allocs_compared"]))
print(r.memory_summary_at_peak)

# %% [markdown]
# ## The report (in a notebook, the last expression of a cell shows it inline)

# %%
page = sublet.report(trace)
saved = page.save(os.path.join(out_dir, "cs336_report.html"))
print("report:", saved, "(%d bytes)" % len(page))
page

# %% [markdown]
# ## Which settings should it run with?

# %%
best = sublet.tune(trace)
ev = best.evidence
print("current settings: min capacity %.2f GiB" % (ev["current"]["min_capacity_bytes"] / gib))
print("PyTorch's knobs:  min capacity %.2f GiB (%s)" %
      (ev["pytorch"]["min_capacity_bytes"] / gib, ev["pytorch"]["fixes"]))
print("with sublet:      min capacity %.2f GiB" % (ev["sublet"]["min_capacity_bytes"] / gib))

# %% [markdown]
# ## The settings to use

# %%
print("export " + best.pytorch_env)
print("export " + best.sublet_env + "    # when sublet is the allocator (sublet.torch.install())")
plan = best.warmup_plan
if plan and plan["helps"]:
    print("warm-up plan: " + plan["env"])
trace.close()
