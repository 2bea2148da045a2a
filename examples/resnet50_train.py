#!/usr/bin/env python3
"""A ResNet-50-shaped convolutional net, trained for a few steps on random
images (issue 29, point 4).

Written here, with random weights and no torchvision: a 7x7/2 stem with
BatchNorm, ReLU and a 3x3/2 max pool; bottleneck blocks [3, 4, 6, 3] of widths
64, 128, 256, 512 (outputs 256 .. 2048, the stride on the 3x3 convolution, a
1x1 projection where the shape changes); adaptive average pooling and a
1000-way fc: 25,557,032 parameters (and 53,173 buffer elements: 53,120 BatchNorm
running statistics and 53 batch counters),
as torchvision's resnet50.  The step: cross-entropy against random labels,
backward, SGD with momentum 0.9 and weight decay 1e-4 as PyTorch picks it
(neither foreach nor fused given: foreach for CUDA parameters), gradients set
to None.  --amp runs the forward under bf16 autocast, --channels-last puts the
model and the images in channels_last; --optimizer adamw swaps in AdamW.

The model is built on the device and the images and labels are drawn there;
nothing in the loop waits for the device; the loss is read once, at the end,
then torch.cuda.max_memory_allocated() and max_memory_reserved() are printed.

    python examples/resnet50_train.py                   # batch 32, 224x224, 2 steps
    sublet nullgpu -- python examples/resnet50_train.py --amp --channels-last
    python examples/resnet50_train.py --device cpu --image 32 --batch 2

examples/estimate_memory.py imports build_model, make_optimizer and train_step
from here.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, width, stride):
        super().__init__()
        out = width * self.expansion
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        y = F.relu(self.bn1(self.conv1(x)), inplace=True)
        y = F.relu(self.bn2(self.conv2(y)), inplace=True)
        y = self.bn3(self.conv3(y))
        return F.relu(y + idt, inplace=True)


class ResNet(nn.Module):
    def __init__(self, layers=(3, 4, 6, 3), widths=(64, 128, 256, 512), classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages, inplanes = [], 64
        for i, (n, w) in enumerate(zip(layers, widths)):
            blocks = []
            for j in range(n):
                blocks.append(Bottleneck(inplanes, w, 2 if (j == 0 and i > 0) else 1))
                inplanes = w * Bottleneck.expansion
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x)), inplace=True))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def add_args(p):
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--image", type=int, default=224, help="image height and width")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--amp", action="store_true", help="the forward under bf16 autocast")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw"])
    p.add_argument("--classes", type=int, default=1000)
    return p


def build_model(args, device):
    with torch.device(device):
        m = ResNet(classes=args.classes)
    if args.channels_last:  # what m.to(memory_format=torch.channels_last) does, which FakeTensorMode refuses
        with torch.no_grad():
            for p in m.parameters():
                if p.dim() == 4:
                    p.data = p.data.contiguous(memory_format=torch.channels_last)
    return m


def make_optimizer(model, args):
    if args.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)


def optimizer_states(args):
    """(name, fp32 tensors the optimizer keeps per parameter)"""
    return ("AdamW", 2) if args.optimizer == "adamw" else ("SGD momentum", 1)


def make_batch(args, device):
    x = torch.randn(args.batch, 3, args.image, args.image, device=device)
    if args.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, args.classes, (args.batch,), device=device)
    return x, y


def train_step(model, opt, batch, device_type, amp):
    x, y = batch
    with torch.autocast(device_type=device_type, dtype=torch.bfloat16, enabled=amp):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def main():
    args = add_args(argparse.ArgumentParser(description=__doc__.split("\n\n")[0])).parse_args()
    dev = torch.device(args.device)
    t0 = time.perf_counter()
    model = build_model(args, dev)
    model.train()
    n = sum(p.numel() for p in model.parameters())
    nb = sum(b.numel() for b in model.buffers())
    print(f"resnet50: {n:,} parameters, {nb:,} buffer elements, batch {args.batch} x 3x{args.image}x{args.image}, "
          f"{args.steps} steps on {dev.type}, {optimizer_states(args)[0]}, amp {'bf16' if args.amp else 'off'}, "
          f"channels_last {args.channels_last}", flush=True)
    opt = make_optimizer(model, args)
    loss = None
    for _ in range(args.steps):
        loss = train_step(model, opt, make_batch(args, dev), dev.type, args.amp)
    if loss is not None:
        print(f"resnet50: last loss {loss.item():.4f}")  # the one host sync
    print(f"resnet50: {time.perf_counter() - t0:.1f} s")
    if dev.type == "cuda":
        print(f"resnet50: max_memory_allocated {torch.cuda.max_memory_allocated()} "
              f"max_memory_reserved {torch.cuda.max_memory_reserved()}")
        # Give PyTorch's autograd device threads a moment to drop their last
        # reference to the finished backward pass before the interpreter is
        # finalized: on a loaded machine one can still hold it, and a thread
        # that asks for the GIL during finalization aborts the process
        # ("terminate called without an active exception", exit 134).
        time.sleep(0.05)


if __name__ == "__main__":
    main()
