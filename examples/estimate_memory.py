#!/usr/bin/env python3
"""The memory other tools would estimate for examples/gpt2_train.py and
examples/resnet50_train.py (issue 29, point 5), printed as JSON.

    python examples/estimate_memory.py gpt2 [--batch 8 --seq 1024 ...]
    python examples/estimate_memory.py resnet50 [--batch 32 --amp ...]
    sublet nullgpu -- python examples/estimate_memory.py gpt2

MODEL is gpt2 or resnet50; the arguments after it are the example's own
(its --device too), so the model, the batch and the step are the example's.

(a) "mem_tracker": PyTorch's own estimate.  The model, the optimizer and
    --steps training steps (default 2, as the example: the second step starts
    with the optimizer's states) run under FakeTensorMode, so nothing is
    allocated or computed, inside torch.distributed._tools.mem_tracker.MemTracker
    (shipped with PyTorch 2.5 and later; 2.14.1 has it), which counts every
    storage made, rounded up to 512 bytes on CUDA as the caching allocator
    rounds, and keeps the peak of their sum.  It knows nothing of the
    allocator's blocks, segments, splitting or cache: the peak it reports is a
    peak of live tensor bytes (compare torch.cuda.max_memory_allocated, never
    max_memory_reserved).  Fake CUDA tensors need a CUDA device that PyTorch
    can open (the autograd engine asks for its context): with none, as in a
    plain python on a machine without a GPU, the fake tensors are put on the
    CPU instead, and "fake_device" says so; under `sublet nullgpu` PyTorch
    sees an H100 and the fake tensors are CUDA tensors, as on the real GPU
    (the attention and convolution kernels picked for an H100, CUDA autocast).
    The other trackers in torch.distributed._tools are not usable here:
    memory_tracker.MemoryTracker reads torch.cuda.memory_allocated() of real
    tensors, and fsdp2_mem_tracker.FSDPMemTracker is MemTracker for FSDP2
    modules.

(b) "model_states": parameters, gradients and optimizer states only, as
    DeepSpeed's estimate_zero*_model_states_mem_needs and Accelerate's
    `accelerate estimate-memory` count them (no activations, no temporaries,
    no allocator):  bytes = P * (w + g + k * s), P the parameter count, w = 4
    (fp32 weights: autocast keeps the parameters fp32), g = 4 (fp32
    gradients), k the optimizer's fp32 tensors per parameter (AdamW: 2,
    exp_avg and exp_avg_sq; SGD with momentum: 1, the momentum buffer), s = 4.
    AdamW: 16 bytes per parameter, SGD momentum: 12.  Buffers (BatchNorm's
    running statistics) are given apart, not in the sum.
"""
import argparse
import importlib.util
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = {"gpt2": "gpt2_train.py", "resnet50": "resnet50_train.py"}


def load(model):
    spec = importlib.util.spec_from_file_location(model + "_train", os.path.join(HERE, MODELS[model]))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Example:
    """One example's model, optimizer and step, behind one interface."""

    def __init__(self, model, argv):
        self.name = model
        self.mod = load(model)
        self.args = self.mod.add_args(argparse.ArgumentParser(prog=f"estimate_memory.py {model}")).parse_args(argv)
        if model == "gpt2":
            self.mod.set_sdpa(self.args)

    def build(self, device):
        m = self.mod.build_model(self.args, device)
        m.train()
        return m

    def optimizer(self, model):
        if self.name == "gpt2":
            return self.mod.make_optimizer(model)
        return self.mod.make_optimizer(model, self.args)

    def optimizer_states(self):
        if self.name == "gpt2":
            return self.mod.OPTIMIZER, self.mod.OPTIMIZER_STATES
        return self.mod.optimizer_states(self.args)

    def step(self, model, opt, device):
        batch = self.mod.make_batch(self.args, device)
        if self.name == "gpt2":
            return self.mod.train_step(model, opt, batch, device.type)
        return self.mod.train_step(model, opt, batch, device.type, self.args.amp)


def mem_tracker(ex):
    out = {"tool": "torch.distributed._tools.mem_tracker.MemTracker under FakeTensorMode",
           "torch": torch.__version__, "steps": ex.args.steps}
    try:
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.distributed._tools.mem_tracker import MemTracker
    except ImportError as e:
        out.update(available=False, error=f"{type(e).__name__}: {e}")
        return out
    out["available"] = True
    want = torch.device(ex.args.device)
    dev = want
    if want.type == "cuda" and not torch.cuda.is_available():
        dev = torch.device("cpu")
        out["note"] = ("no CUDA device visible to PyTorch: the fake tensors are CPU tensors (CPU kernels and "
                       "CPU autocast); under `sublet nullgpu` they are CUDA tensors")
    out["fake_device"] = dev.type
    try:
        with FakeTensorMode():
            model = ex.build(dev)
            opt = ex.optimizer(model)
            mt = MemTracker()
            mt.track_external(model, opt)
            with mt:
                for _ in range(ex.args.steps):
                    ex.step(model, opt, dev)
                    mt.reset_mod_stats()  # MemTracker keeps one iteration's module stats; the peak stays
            peak = mt.get_tracker_snapshot("peak")
    except Exception as e:  # report, not crash: (b) stands alone
        out.update(error=f"{type(e).__name__}: {e}")
        return out
    per = {}
    for d, snap in peak.items():
        per[str(d)] = {(k.value if hasattr(k, "value") else str(k)): int(v) for k, v in snap.items()}
    key = next((k for k in per if torch.device(k).type == dev.type), None)
    out["peak_bytes"] = per[key]["Total"] if key else 0
    out["peak_device"] = key
    out["peak_by_device"] = per
    return out


def model_states(ex):
    with torch.device("meta"):  # shapes only, nothing allocated
        model = ex.mod.build_model(ex.args, "meta")
    p = sum(t.numel() for t in model.parameters())
    buffers = sum(t.numel() * t.element_size() for t in model.buffers())
    name, k = ex.optimizer_states()
    w = g = s = 4
    bpp = w + g + k * s
    return {"formula": "P * (w + g + k*s): P parameters, w=4 fp32 weights, g=4 fp32 gradients, "
                       "k fp32 optimizer states per parameter of s=4 bytes",
            "optimizer": name, "parameters": p, "w": w, "g": g, "k": k, "s": s,
            "bytes_per_parameter": bpp,
            "weights_bytes": p * w, "gradients_bytes": p * g, "optimizer_bytes": p * k * s,
            "bytes": p * bpp, "buffers_bytes": buffers}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in MODELS:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        print(f"usage: estimate_memory.py {{{'|'.join(MODELS)}}} [the example's arguments]", file=sys.stderr)
        return 2
    ex = Example(sys.argv[1], sys.argv[2:])
    b = model_states(ex)
    a = mem_tracker(ex)
    print(json.dumps({"model": ex.name, "args": vars(ex.args), "parameters": b["parameters"],
                      "mem_tracker": a, "model_states": b}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
