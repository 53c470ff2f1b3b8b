"""PyTorch's own Gloo all_reduce timed the way nccl-tests and `gpuorch bench` time it, for the
comparison in scripts/hw/host-backend-on-device.sh. Start under torchrun (one process per rank):
  torchrun --nproc_per_node N gloo_allreduce.py MIN_BYTES MAX_BYTES FACTOR ITERS WARMUP
Rank 0 prints `size time_us algbw busbw` per size (float32, sum, out of place as nccl-tests'
default: a fresh copy of the input is reduced, outside the timed region).
"""
import os
import sys
import time

import torch
import torch.distributed as dist

lo, hi, factor, iters, warmup = (int(a) for a in sys.argv[1:6])
dist.init_process_group("gloo")
rank, n = dist.get_rank(), dist.get_world_size()
if rank == 0:
    print(f"# torch {torch.__version__} gloo, {n} ranks, threads {torch.get_num_threads()}")
    print(f"# {'size':>12} {'time_us':>10} {'algbw':>8} {'busbw':>8}")
size = lo
while size <= hi:
    count = max(1, size // 4)
    x = torch.full((count,), float(rank + 1))
    bufs = [x.clone() for _ in range(iters + warmup)]
    for b in bufs[:warmup]:
        dist.all_reduce(b)
    dist.barrier()
    t = time.perf_counter()
    for b in bufs[warmup:]:
        dist.all_reduce(b)
    dist.barrier()
    us = (time.perf_counter() - t) / iters * 1e6
    ok = bool(torch.all(bufs[-1] == n * (n + 1) / 2))
    nbytes = count * 4
    alg = nbytes / us / 1e3
    if rank == 0:
        print(f"  {nbytes:>12} {us:>10.1f} {alg:>8.2f} {alg * 2 * (n - 1) / n:>8.2f}"
              f"{'' if ok else '  WRONG'}", flush=True)
    size *= factor
dist.destroy_process_group()
