#!/usr/bin/env python3
"""The PyTorch workload of scripts/gpu-check: a small transformer trained on
random tokens, deterministic to the bit.

    python3 scripts/gpu/workload.py --allocator pytorch|sublet --out run.json
        [--steps N] [--record snapshot.pickle] [--fraction F] [--lib PATH]

One run per process: the allocator is chosen before PyTorch touches the GPU
(sublet through sublet.torch.install()), and PYTORCH_CUDA_ALLOC_CONF /
SUBLET_ALLOC_CONF come from the environment.  The output JSON has the losses
(also as float.hex(), for a bitwise comparison), the allocator's statistics
(torch.cuda.memory_stats() or sublet.torch.memory_stats()), and the device.
--record records PyTorch's own history (_record_memory_history) from the
first allocation and dumps the snapshot (_dump_snapshot) at the end.

The loop: embedding -> 4 transformer encoder layers (d_model 256, 8 heads,
feed-forward 1024, no dropout) -> vocabulary projection, AdamW, batches of
16 with sequence lengths that change every step (so that sizes vary), an
empty_cache() half-way (sublet's reset hook), and a side stream whose tensor
is used on the main stream with record_stream() every 5 steps (sublet's
record_stream hook).  Determinism: fixed seeds, CPU-generated data,
torch.use_deterministic_algorithms(True), CUBLAS_WORKSPACE_CONFIG, no TF32,
the math attention kernel only.
"""

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCAB, D_MODEL, HEADS, FF, LAYERS, BATCH = 2000, 256, 8, 1024, 4, 16
SEQ_LENS = (64, 128, 96, 192, 48, 160)


def deterministic(torch):
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for name in ("enable_flash_sdp", "enable_mem_efficient_sdp", "enable_cudnn_sdp"):
        fn = getattr(torch.backends.cuda, name, None)
        if fn is not None:
            fn(False)
    torch.backends.cuda.enable_math_sdp(True)


def build_model(torch):
    nn = torch.nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, D_MODEL)
            layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, FF, dropout=0.0, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
            self.head = nn.Linear(D_MODEL, VOCAB)

        def forward(self, x):
            return self.head(self.enc(self.emb(x)))

    torch.manual_seed(0)
    return Model()  # built on the CPU: the weights do not depend on the allocator


def train(torch, steps):
    dev = torch.device("cuda", 0)
    model = build_model(torch).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1234)
    side = torch.cuda.Stream(dev)
    losses = []
    for step in range(steps):
        n = SEQ_LENS[step % len(SEQ_LENS)]
        x = torch.randint(0, VOCAB, (BATCH, n), generator=gen).to(dev)
        y = torch.randint(0, VOCAB, (BATCH, n), generator=gen).to(dev)
        if step % 5 == 4:
            # a tensor made on a side stream and used on the main one
            side.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(side):
                mask = (x % 7 != 0).long()
            torch.cuda.current_stream(dev).wait_stream(side)
            mask.record_stream(torch.cuda.current_stream(dev))
            x = x * mask
            del mask
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step == steps // 2:
            torch.cuda.empty_cache()
    torch.cuda.synchronize(dev)
    return losses


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--allocator", choices=("pytorch", "sublet"), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--record", help="dump PyTorch's memory snapshot of the run here")
    ap.add_argument("--fraction", type=float, help="torch.cuda.set_per_process_memory_fraction")
    ap.add_argument("--lib", help="libsublet_torch.so (default: found by sublet.torch)")
    a = ap.parse_args(argv)

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before cuBLAS starts
    import torch

    st = None
    if a.allocator == "sublet":
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import sublet.torch as st

        st.install(a.lib)
    deterministic(torch)
    if a.record:
        torch.cuda.memory._record_memory_history(max_entries=2_000_000)
    if a.fraction is not None:
        torch.cuda.set_per_process_memory_fraction(a.fraction, 0)
    t0 = time.time()
    losses = train(torch, a.steps)
    wall = time.time() - t0
    if a.allocator == "sublet":
        stats = st.memory_stats(0)
        summary = st.memory_summary(0)
    else:
        stats = {k: v for k, v in torch.cuda.memory_stats(0).items()}
        summary = torch.cuda.memory_summary(0)
    if a.record:
        torch.cuda.memory._dump_snapshot(a.record)
        torch.cuda.memory._record_memory_history(enabled=None)
    props = torch.cuda.get_device_properties(0)
    out = {
        "allocator": a.allocator,
        "steps": a.steps,
        "losses": losses,
        "losses_hex": [float(v).hex() for v in losses],
        "stats": stats,
        "summary": summary,
        "wall_s": wall,
        "device": props.name,
        "total_memory": int(props.total_memory),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "conf": {k: os.environ.get(k) for k in ("PYTORCH_CUDA_ALLOC_CONF", "SUBLET_ALLOC_CONF")},
        "fraction": a.fraction,
        "record": a.record,
    }
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
