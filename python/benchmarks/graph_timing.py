"""Device time per call under CUDA-graph replay, the method of every
benchmark here (docs/performance.md, The method)."""

from __future__ import annotations

import statistics

import torch


def graph_us(make, calls=20, replays=15) -> float:
    """Median device time per call of a graph of `calls` calls. `make()` is
    called inside the capture and returns the callable to capture."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        f = make()
        for _ in range(3):
            f()  # warm-up (and compilation) outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        f = make()
        for _ in range(calls):
            f()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)
