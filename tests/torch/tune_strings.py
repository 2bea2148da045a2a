#!/usr/bin/env python3
"""Every PyTorch-side string `sublet tune` printed for the newest release
(issue 31, point 0), given to a real PyTorch on the null device: each is set
as PYTORCH_CUDA_ALLOC_CONF in a child forked before CUDA starts, the child
allocates, and PyTorch must start (it terminates on an option it does not
know) and report the very string in its snapshot's allocator_settings; a
memory-fraction call tune prints beside a string is made too.

  tune_strings.py TUNE.json...   (run under `sublet nullgpu`)"""
import json
import sys

import alloc_conf


def strings(doc):
    """(settings, fraction or None) of every PyTorch-side answer in a tune
    document: the answer, the Pareto points; the current settings are the
    user's, not tune's."""
    out = []
    p = doc["pytorch"]
    out.append((p["evaluation"]["conf"], p["evaluation"].get("memory_fraction_call")))
    for q in doc["pareto"]["pytorch"]:
        out.append((q["conf"], q.get("memory_fraction_call")))
    return out


def main():
    import torch  # before CUDA starts: each child starts it with its own settings

    seen = {}
    for path in sys.argv[1:]:
        with open(path) as f:
            doc = json.load(f)
        for conf, fraction in strings(doc):
            seen.setdefault((conf, fraction), path)
    version = torch.__version__
    bad = 0
    for (conf, fraction), path in sorted(seen.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        status, got = alloc_conf.taken(torch, conf, fraction)
        if status != 0 or got != conf:
            bad += 1
            print("FAIL PyTorch %s refuses %r (fraction %s) from %s: status %d, %s"
                  % (version, conf, fraction, path, status, got), flush=True)
        else:
            print("ok %r%s" % (conf, "" if fraction is None else " + fraction %s" % fraction),
                  flush=True)
    print("tune_strings: %d of %d strings taken by PyTorch %s" % (len(seen) - bad, len(seen), version))
    return 1 if bad or not seen else 0


if __name__ == "__main__":
    sys.exit(main())
