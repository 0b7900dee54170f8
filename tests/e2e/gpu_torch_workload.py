"""A real training loop on a real GPU (torch with CUDA), for the GPU tests
that run where one exists.

usage: gpu_torch_workload.py MODE SECONDS
  bound:   large matmuls, a few microseconds of Python a step: the GPU is busy
  starved: 20 ms of Python batch preparation a step, then a small matmul
"""

import sys
import time

import torch


def prepare_batch(ms):
    """The input pipeline, in Python."""
    end = time.perf_counter() + ms / 1000
    rows = []
    while time.perf_counter() < end:
        rows.append([float(i % 7) for i in range(256)])
    return rows[-1]


def main():
    mode, seconds = sys.argv[1], float(sys.argv[2])
    device = torch.device("cuda")
    size = 8192 if mode == "bound" else 512
    weights = torch.randn(size, size, device=device)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if mode == "starved":
            row = prepare_batch(20)
            batch = torch.tensor(row, device=device).repeat(size, size // 256)
        else:
            batch = weights
        for _ in range(4 if mode == "bound" else 1):
            batch = batch @ weights
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
