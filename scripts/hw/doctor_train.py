#!/usr/bin/env python3
"""Training loops for scripts/hw/doctor-on-device.sh: jobs that gpuorch doctor should judge.

--mode compute   a ResNet-style conv net on synthetic batches made on the GPU (GPU busy; the
                 NUMA check looks at this process), plus a touched host buffer so numa_maps has
                 pages to count.
--mode starved   the same net fed by a DataLoader with num_workers=0, pin_memory=False and a
                 heavy CPU augmentation per sample (numpy, one thread): the main thread is pegged
                 and the GPU waits.
--mode fed       the same net fed by num_workers=8, pin_memory=True, persistent workers, a light
                 transform and non_blocking copies.
--mode allreduce one all_reduce loop through torch.distributed with NCCL (run with NCCL_DEBUG=INFO
                 under gpuorch launch or torchrun).

Runs until --stop-file exists or --max-seconds pass; writes --ready-file after --warmup-steps so
the caller samples a job that is past its start-up. Writes a JSON summary to --out.
"""
import argparse
import json
import os
import time

import torch
import torch.nn as nn

try:
    import numpy as np
except ImportError:  # torch without numpy: the same work in torch ops, on one thread
    np = None


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--mode", choices=["compute", "starved", "fed", "allreduce"], required=True)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--size", type=int, default=128, help="image side, pixels")
    p.add_argument("--width", type=int, default=64, help="channels of the first stage")
    p.add_argument("--workers", type=int, default=8, help="DataLoader workers (--mode fed)")
    p.add_argument("--aug-iters", type=int, default=24, help="augmentation passes (--mode starved)")
    p.add_argument("--host-mib", type=int, default=1024, help="host buffer touched (--mode compute)")
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--max-seconds", type=float, default=90)
    p.add_argument("--ready-file", default="")
    p.add_argument("--stop-file", default="")
    p.add_argument("--out", default="")
    return p.parse_args()


def block(cin, cout, stride):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


def resnetish(width, classes=1000):
    w = width
    return nn.Sequential(
        nn.Conv2d(3, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True),
        block(w, w, 1), block(w, 2 * w, 2), block(2 * w, 4 * w, 2), block(4 * w, 8 * w, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8 * w, classes))


class Images(torch.utils.data.Dataset):
    """A pool of random uint8 images (made once, shared with forked workers), served with a
    random flip (light) or, with aug_iters > 0, a smoothing pass repeated on the CPU (heavy)."""

    def __init__(self, size, aug_iters, pool=256, length=1 << 30):
        if np is not None:
            rng = np.random.default_rng(0)
            self.pool = rng.integers(0, 255, size=(pool, 3, size, size), dtype=np.uint8)
        else:
            self.pool = torch.randint(0, 255, (pool, 3, size, size), dtype=torch.uint8,
                                      generator=torch.Generator().manual_seed(0))
        self.aug_iters = aug_iters
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        x = self.pool[i % len(self.pool)]
        if np is None:
            return self.torch_item(x, i), i % 1000
        if i % 2:
            x = x[:, :, ::-1]
        if self.aug_iters:
            y = x.astype(np.float32)
            for _ in range(self.aug_iters):
                y = 0.25 * (np.roll(y, 1, 1) + np.roll(y, -1, 1) + np.roll(y, 1, 2) + np.roll(y, -1, 2))
            x = y.clip(0, 255).astype(np.uint8)
        return torch.from_numpy(np.ascontiguousarray(x)), i % 1000

    def torch_item(self, x, i):
        if i % 2:
            x = torch.flip(x, (2,))
        if self.aug_iters:
            y = x.float()
            for _ in range(self.aug_iters):
                y = 0.25 * (torch.roll(y, 1, 1) + torch.roll(y, -1, 1) + torch.roll(y, 1, 2) + torch.roll(y, -1, 2))
            x = y.clamp(0, 255).to(torch.uint8)
        return x.contiguous()


def touch(path):
    if path:
        with open(path, "w") as f:
            f.write(f"{os.getpid()}\n")


def should_stop(args, start):
    return (args.stop_file and os.path.exists(args.stop_file)) or time.time() - start > args.max_seconds


def train(args, device):
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model = resnetish(args.width).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    host = None
    if args.mode == "compute":
        host = torch.ones(args.host_mib << 18, dtype=torch.float32)  # touched: resident pages
        def batches():
            x = torch.randn(args.batch, 3, args.size, args.size, device=device)
            y = torch.randint(0, 1000, (args.batch,), device=device)
            while True:
                yield x, y
        source = batches()
    else:
        fed = args.mode == "fed"
        if np is None and not fed:
            torch.set_num_threads(1)  # the augmentation stays on the main thread, as numpy's does
        extra = {"persistent_workers": True, "prefetch_factor": 4} if fed else {}
        loader = torch.utils.data.DataLoader(
            Images(args.size, 0 if fed else args.aug_iters), batch_size=args.batch,
            num_workers=args.workers if fed else 0, pin_memory=fed, **extra)
        def batches():
            for x, y in loader:
                x = x.to(device, non_blocking=fed).float().div_(255)
                yield x.contiguous(memory_format=torch.channels_last), y.to(device, non_blocking=fed)
        source = batches()
    start = time.time()
    steps, ready_at, ready_steps = 0, None, 0
    for x, y in source:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        steps += 1
        if steps == args.warmup_steps:
            torch.cuda.synchronize()
            ready_at, ready_steps = time.time(), steps
            touch(args.ready_file)
        if steps % 5 == 0 and should_stop(args, start):
            break
    torch.cuda.synchronize()
    end = time.time()
    measured = steps - ready_steps if ready_at else 0
    return {"mode": args.mode, "steps": steps, "batch": args.batch, "size": args.size,
            "samples_per_second": measured * args.batch / (end - ready_at) if measured else None,
            "loss": float(loss), "host_buffer_mib": args.host_mib if host is not None else 0}


def allreduce(args, device):
    import torch.distributed as dist
    dist.init_process_group("nccl")
    x = torch.ones(64 << 20, device=device)
    start = time.time()
    n = 0
    while n < 50 and not should_stop(args, start):
        dist.all_reduce(x)
        n += 1
        if n == args.warmup_steps:
            touch(args.ready_file)
    torch.cuda.synchronize()
    result = {"mode": "allreduce", "iterations": n, "world": dist.get_world_size(),
              "value": float(x[0]), "expected": float(dist.get_world_size() ** n)}
    dist.destroy_process_group()
    return result


def main():
    args = parse_args()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    # A launcher that shows each rank only its own GPU leaves one device: index 0.
    index = local if local < torch.cuda.device_count() else 0
    torch.cuda.set_device(index)
    device = torch.device("cuda", index)
    result = allreduce(args, device) if args.mode == "allreduce" else train(args, device)
    result["pid"] = os.getpid()
    print(json.dumps(result), flush=True)
    if args.out and int(os.environ.get("RANK", "0")) == 0:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
