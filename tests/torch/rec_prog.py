#!/usr/bin/env python3
"""A program for `sublet record` and `sublet fit` (tests/torch/record_check.sh):
allocations and frees whose sizes grow with SIZE, elementwise work only.

  rec_prog.py SIZE [--spawn] [--catch] [--fraction F]

Each step holds SIZE activations of 4 MiB (float32 tensors of 1 Mi elements),
computes on them (exp, softmax, sum, cat), frees them, and keeps one result
per step; the peak grows by about 8 MiB per unit of SIZE.  --spawn starts a
Python subprocess that imports torch and allocates too (the recording must
be this process's alone).  --catch catches an OOM and goes on (the program
then exits 0).  --fraction F calls torch.cuda.set_per_process_memory_fraction(F)
first."""
import subprocess
import sys

import torch


def main():
    size = int(sys.argv[1])
    keep = []
    if "--fraction" in sys.argv:
        torch.cuda.set_per_process_memory_fraction(float(sys.argv[sys.argv.index("--fraction") + 1]))
    if "--spawn" in sys.argv:
        subprocess.run([sys.executable, "-c",
                        "import torch; x = torch.ones(1 << 20, device='cuda'); print('child', float(x.sum()))"],
                       check=True)
    for step in range(3):
        try:
            acts = [torch.randn(1 << 20, device="cuda") for _ in range(size)]
            y = torch.cat([a.exp() for a in acts[: max(1, size // 2)]])
            keep.append(torch.softmax(y[: 1 << 18], dim=0).sum())
            del acts, y
        except torch.OutOfMemoryError:
            if "--catch" not in sys.argv:
                raise
            print("caught an OOM at step", step)
            break
    torch.cuda.synchronize()
    print("rec_prog", size, "done", len(keep))


main()
