"""cuDNN on the null device (issue 29, point 1): what a convolutional net and
attention ask of cuDNN under a real PyTorch, each answer checked.

Run by tests/torch/torch_dnn.sh under `sublet nullgpu`:
  dnn_check.py          every check (cuDNN's backend API, PyTorch's default)
  dnn_check.py --v7     the convolutions again under TORCH_CUDNN_V8_API_DISABLED=1
  dnn_check.py --stub   calls a cuDNN entry point the null device does not emulate

The workspace rule checked here is the one docs/nullgpu.md states (and
plugins/nullgpu/cudnn_backend.c, cudnn.c implement): engine 0 (algorithm 1)
of a convolution needs 4 bytes per filter tap and input channel of a group
forward, per filter tap and output channel of a group backward to data,
per element of the filter gradient backward to the filter; batch norm
reserves 8 bytes per channel; each rounded up to 256 bytes.
"""
import ctypes
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

checks = 0


def check(cond, what):
    global checks
    if not cond:
        print(f"dnn_check: FAILED: {what}", flush=True)
        sys.stdout.flush()
        os._exit(1)
    checks += 1


def align(n):
    return (n + 255) // 256 * 256


def resnet_block(c_in, c, stride, groups=1, dilation=1):
    """A ResNet-50 bottleneck without its skip: 1x1, 3x3 (strided, grouped, dilated), 1x1, each with BN."""
    return nn.Sequential(
        nn.Conv2d(c_in, c, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True),
        nn.Conv2d(c, c, 3, stride=stride, padding=dilation, dilation=dilation, groups=groups, bias=False),
        nn.BatchNorm2d(c), nn.ReLU(inplace=True),
        nn.Conv2d(c, 4 * c, 1, bias=False), nn.BatchNorm2d(4 * c), nn.ReLU(inplace=True))


def net():
    return nn.Sequential(
        nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
        resnet_block(64, 64, 1), resnet_block(256, 128, 2), resnet_block(512, 256, 2, groups=32),
        resnet_block(1024, 512, 2, dilation=2), nn.AdaptiveAvgPool2d(1)).cuda()


def train_step(memory_format, amp, batch=8):
    m = net().to(memory_format=memory_format)
    x = torch.randn(batch, 3, 96, 96, device="cuda").to(memory_format=memory_format).requires_grad_()
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
        y = m(x)
    check(y.shape == (batch, 2048, 1, 1), f"output shape {tuple(y.shape)}")
    check(y.dtype == (torch.bfloat16 if amp else torch.float32), f"output dtype {y.dtype}")
    y.float().sum().backward()
    check(x.grad.shape == x.shape, "input gradient shape")
    check(all(p.grad is not None and p.grad.shape == p.shape for p in m.parameters()), "parameter gradients")
    m.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
        z = m(x)
    check(z.shape == y.shape, "eval output shape")
    torch.cuda.synchronize()


def nets():
    for benchmark in (False, True):
        torch.backends.cudnn.benchmark = benchmark
        for fmt in (torch.contiguous_format, torch.channels_last):
            for amp in (False, True):
                train_step(fmt, amp)
                print(f"dnn_check: train benchmark={benchmark} {fmt} bf16={amp}: ok", flush=True)
    torch.backends.cudnn.benchmark = False


def variants():
    """Stride, padding, dilation, groups, depthwise, 1-d and 3-d convolutions, forward and backward."""
    cases = [
        (nn.Conv1d(16, 32, 5, stride=2, padding=2), (4, 16, 100)),
        (nn.Conv2d(32, 32, 3, padding=1, groups=32), (4, 32, 20, 20)),   # depthwise
        (nn.Conv2d(32, 64, 3, stride=(2, 1), padding=(0, 3), dilation=(1, 3), groups=4), (4, 32, 21, 17)),
        (nn.Conv3d(8, 16, 3, stride=2, padding=1), (2, 8, 9, 10, 11)),
        (nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1), (2, 16, 8, 8)),
    ]
    for mod, shape in cases:
        mod = mod.cuda()
        x = torch.randn(*shape, device="cuda", requires_grad=True)
        y = mod(x)
        ref = torch.nn.functional.conv_transpose2d if isinstance(mod, nn.ConvTranspose2d) else None
        if ref is None:
            want = [shape[0], mod.out_channels]
            for i, n in enumerate(shape[2:]):
                k, s, p, d = mod.kernel_size[i], mod.stride[i], mod.padding[i], mod.dilation[i]
                want.append((n + 2 * p - d * (k - 1) - 1) // s + 1)
            check(list(y.shape) == want, f"{mod}: shape {list(y.shape)}, not {want}")
        else:
            check(list(y.shape) == [2, 8, 16, 16], f"{mod}: shape {list(y.shape)}")
        y.sum().backward()
        check(x.grad.shape == x.shape and mod.weight.grad.shape == mod.weight.shape, f"{mod}: gradients")
    # the fused graphs (a convolution, pointwise additions and a ReLU), as torch.ao's frozen models call them
    x, w = torch.randn(2, 8, 16, 16, device="cuda"), torch.randn(16, 8, 3, 3, device="cuda")
    b, z = torch.randn(16, device="cuda"), torch.randn(2, 16, 14, 14, device="cuda")
    y = torch.cudnn_convolution_relu(x, w, b, (1, 1), (0, 0), (1, 1), 1)
    check(y.shape == (2, 16, 14, 14), f"cudnn_convolution_relu: shape {tuple(y.shape)}")
    y = torch.cudnn_convolution_add_relu(x, w, z, 1.0, b, (1, 1), (0, 0), (1, 1), 1)
    check(y.shape == (2, 16, 14, 14), f"cudnn_convolution_add_relu: shape {tuple(y.shape)}")
    print("dnn_check: convolution variants: ok", flush=True)


def names(entry):
    return " ".join(f.get("name", "") for f in entry.get("frames", []))


def workspaces():
    """A convolution's workspaces and batch norm's reserve space, allocated by PyTorch's
    allocator with the sizes cuDNN reports, are in its memory history."""
    n, c_in, c_out, k, groups = 4, 64, 96, 3, 2
    conv = nn.Conv2d(c_in, c_out, k, padding=1, groups=groups, bias=False).cuda()
    bn = nn.BatchNorm2d(c_out).cuda()
    x = torch.randn(n, c_in, 16, 16, device="cuda", requires_grad=True)
    torch.cuda.memory._record_memory_history(stacks="all")
    bn(conv(x)).sum().backward()
    torch.cuda.synchronize()
    trace = torch.cuda.memory._snapshot()["device_traces"][0]
    torch.cuda.memory._record_memory_history(enabled=None)
    plan = sorted(e["size"] for e in trace if e["action"] == "alloc" and "run_conv_plan" in names(e))
    want = sorted([align(4 * (c_in // groups) * k * k),       # forward
                   align(4 * (c_out // groups) * k * k),      # backward data
                   align(4 * conv.weight.numel())])           # backward filter
    check(plan == want, f"the convolution workspaces in the memory history are {plan}, not {want}")
    reserve = [e["size"] for e in trace if e["action"] == "alloc" and "cudnn_batch_norm_out" in names(e)]
    check(align(8 * c_out) in reserve, f"no batch norm reserve space of {align(8 * c_out)} bytes in {reserve}")
    print(f"dnn_check: workspaces {plan}, reserve {align(8 * c_out)}: ok", flush=True)


def attention():
    """scaled_dot_product_attention, bf16, causal, head dim 64, on an H100: PyTorch 2.14.1 picks cuDNN's."""
    q, k, v = (torch.randn(2, 8, 256, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    choice = torch._fused_sdp_choice(q, k, v, is_causal=True)
    print(f"dnn_check: sdpa backend {torch.nn.attention.SDPBackend(choice).name}", flush=True)
    if choice != int(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
        print("dnn_check: (not cuDNN's: the cuDNN attention check is skipped)", flush=True)
        return
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    check(o.shape == q.shape and o.dtype == torch.bfloat16, "attention output")
    o.sum().backward()
    check(all(t.grad.shape == t.shape for t in (q, k, v)), "attention gradients")
    print("dnn_check: cuDNN attention forward and backward: ok", flush=True)


def stub():
    lib = ctypes.CDLL(None)  # the process's scope: the null device, preloaded, comes first
    desc = ctypes.c_void_p()
    rc = lib.cudnnCreatePoolingDescriptor(ctypes.byref(desc))
    print(f"dnn_check: cudnnCreatePoolingDescriptor returned {rc}", flush=True)
    check(rc == 3000, f"a stub returned {rc}, not CUDNN_STATUS_NOT_SUPPORTED (3000)")


def main():
    check(torch.backends.cudnn.is_available() and torch.backends.cudnn.enabled, "cuDNN available")
    check(torch.backends.cudnn.version() == 92400, f"cuDNN version {torch.backends.cudnn.version()}")
    if "--stub" in sys.argv:
        stub()
    elif "--v7" in sys.argv:
        train_step(torch.contiguous_format, False)
        variants()
        print("dnn_check: v7 API: ok", flush=True)
    else:
        nets()
        variants()
        workspaces()
        attention()
    print(f"dnn_check: {checks} checks passed", flush=True)


main()
# PyTorch's autograd threads may still be letting go of a graph task while the
# interpreter finalizes (a race of PyTorch and Python 3.11 at exit, with or
# without cuDNN); leave at once, the checks done.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
