#!/usr/bin/env python3
"""A GPT-2-small-shaped decoder-only transformer, trained for a few steps on
random tokens (issue 29, point 4).

Written here in plain PyTorch, with random weights and nothing downloaded:
12 layers, 12 heads, 768 wide, a 50257-token vocabulary and a 1024-token
context; token and position embeddings, pre-LayerNorm blocks, causal
F.scaled_dot_product_attention, a GELU MLP (4x), a final LayerNorm and an LM
head tied to the token embedding: 124,439,808 parameters at the default size.
The step: bf16 autocast, cross-entropy against random token ids, backward,
AdamW as PyTorch picks it for CUDA parameters (neither foreach nor fused given:
the foreach implementation), gradients set to None.

The model is built on the device (`with torch.device(dev)`), so that no
weight is ever made on the host, and the inputs are drawn there
(torch.randint(device=...)).  Nothing in the loop waits for the device; the
loss is read once, after the last step.  At the end it prints
torch.cuda.max_memory_allocated() and max_memory_reserved().

    python examples/gpt2_train.py                       # batch 8, 1024 tokens, 2 steps
    sublet nullgpu -- python examples/gpt2_train.py     # the same on the null device
    python examples/gpt2_train.py --device cpu --layers 2 --embd 64 --seq 32 --batch 2

--sdpa cudnn|flash|efficient|math allows one attention backend only (PyTorch
2.14 picks cuDNN's on an H100; flash needs no cuDNN).

examples/estimate_memory.py imports build_model, make_optimizer and train_step
from here.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 50257
CONTEXT = 1024


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        assert n_embd % n_head == 0, "n_embd must be a multiple of n_head"
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        k = k.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        v = v.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, n_layer=12, n_head=12, n_embd=768, vocab=VOCAB, context=CONTEXT):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(context, n_embd)
        self.h = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one tensor, counted once
        for m in self.modules():  # GPT-2's initialisation
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def add_args(p):
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=CONTEXT, help="tokens per sequence (at most the context)")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--embd", type=int, default=768)
    p.add_argument("--heads", type=int, default=None,
                   help="attention heads (default 12, or embd/64 when --embd is under 768)")
    p.add_argument("--vocab", type=int, default=VOCAB)
    p.add_argument("--context", type=int, default=None, help="position embeddings (default max(1024, --seq))")
    p.add_argument("--sdpa", default="default", choices=["default", "cudnn", "flash", "efficient", "math"],
                   help="the only attention backend allowed (default: PyTorch's own choice)")
    return p


def set_sdpa(args):
    """Allow only the attention backend --sdpa names (all of them by default)."""
    if args.sdpa == "default":
        return
    for name in ("cudnn", "flash", "efficient", "math"):
        getattr(torch.backends.cuda, f"enable_{'mem_efficient' if name == 'efficient' else name}_sdp")(
            name == args.sdpa)


def config(args):
    heads = args.heads or (12 if args.embd >= 768 else max(1, args.embd // 64))
    context = args.context or max(CONTEXT, args.seq)
    return dict(n_layer=args.layers, n_head=heads, n_embd=args.embd, vocab=args.vocab, context=context)


def build_model(args, device):
    with torch.device(device):
        return GPT(**config(args))


def make_optimizer(model):
    # PyTorch's default choice: foreach for CUDA parameters, for-loop on the CPU
    return torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)


# what the optimizer keeps per parameter, as examples/estimate_memory.py counts it
OPTIMIZER = "AdamW"
OPTIMIZER_STATES = 2  # exp_avg, exp_avg_sq, each the parameter's dtype (fp32)


def make_batch(args, device):
    x = torch.randint(0, args.vocab, (args.batch, args.seq), device=device)
    y = torch.randint(0, args.vocab, (args.batch, args.seq), device=device)
    return x, y


def train_step(model, opt, batch, device_type):
    x, y = batch
    with torch.autocast(device_type=device_type, dtype=torch.bfloat16):
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def main():
    args = add_args(argparse.ArgumentParser(description=__doc__.split("\n\n")[0])).parse_args()
    dev = torch.device(args.device)
    set_sdpa(args)
    t0 = time.perf_counter()
    model = build_model(args, dev)
    n = sum(p.numel() for p in model.parameters())
    print(f"gpt2: {n:,} parameters ({config(args)}), batch {args.batch} x {args.seq} tokens, "
          f"{args.steps} steps on {dev.type}", flush=True)
    opt = make_optimizer(model)
    loss = None
    for _ in range(args.steps):
        loss = train_step(model, opt, make_batch(args, dev), dev.type)
    if loss is not None:
        print(f"gpt2: last loss {loss.item():.4f}")  # the one host sync
    print(f"gpt2: {time.perf_counter() - t0:.1f} s")
    if dev.type == "cuda":
        print(f"gpt2: max_memory_allocated {torch.cuda.max_memory_allocated()} "
              f"max_memory_reserved {torch.cuda.max_memory_reserved()}")
        # Give PyTorch's autograd device threads a moment to drop their last
        # reference to the finished backward pass before the interpreter is
        # finalized: on a loaded machine one can still hold it, and a thread
        # that asks for the GIL during finalization aborts the process
        # ("terminate called without an active exception", exit 134).
        time.sleep(0.05)


if __name__ == "__main__":
    main()
