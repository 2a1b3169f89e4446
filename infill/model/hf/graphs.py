"""Whole-layout forward passes replayed from CUDA graphs.

On a GPU, at one or a few rows, a transformers decoder's forward pass is bound by launching its
kernels (thousands of operator calls), not by the GPU: replaying a captured CUDA graph removes that
cost (bench/results/gpu-h200: 31.4 ms eager, 5.6 ms replayed, 0.5B shape, 1,057 tokens, one row).

A graph replays fixed shapes, so every layout is padded to a multiple of ``BUCKET`` tokens: a
padding token attends to itself alone and nothing attends to it, so the real tokens' states are
those of the unpadded pass. A shape is run eagerly (padded) the first time it is seen and captured
the second time, so a one-off shape costs no capture; at most ``KEEP`` graphs are held, the least
recently used dropped. Replaying runs the same kernels as the eager pass on the same padded inputs.

Not here: passes that record or read keys and values (every step of the approximate mode, its
first too: their buffers change every fill), a model spread over several GPUs, the CPU (the model decides where this runs).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import torch

BUCKET = 128  # tokens: a layout's length is rounded up to a multiple of this
KEEP = 4  # graphs held (each keeps its own activation memory)
SEEN = 64  # shapes remembered as seen once


def pad_layout(tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, size: int, pad_id: int):
    """The layout ([R, N] tokens and positions, [R, 1, N, N] additive mask) padded to ``size``
    tokens: pad tokens at position 0 that see only themselves and that no real token sees."""
    R, N = tokens.shape
    if N == size:
        return tokens, positions, mask
    t = tokens.new_full((R, size), pad_id)
    t[:, :N] = tokens
    p = positions.new_zeros((R, size))
    p[:, :N] = positions
    m = mask.new_full((R, 1, size, size), torch.finfo(mask.dtype).min)
    m[:, :, :N, :N] = mask
    extra = torch.arange(N, size, device=mask.device)
    m[:, :, extra, extra] = 0
    return t, p, m


@dataclass
class _Graph:
    graph: torch.cuda.CUDAGraph
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    out: torch.Tensor


class GraphRunner:
    """``run(tokens, positions, mask) -> states [R, N, d]``, padded and replayed from CUDA graphs."""

    def __init__(self, run: Callable, pad_id: int, bucket: int = BUCKET, keep: int = KEEP):
        self.run, self.pad_id, self.bucket, self.keep = run, pad_id, bucket, keep
        self._graphs: OrderedDict[tuple, _Graph] = OrderedDict()
        self._seen: OrderedDict[tuple, None] = OrderedDict()
        self.captures = 0  # graphs captured so far

    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        R, N = tokens.shape
        size = -(-N // self.bucket) * self.bucket
        key = (R, size, mask.dtype, tokens.device)
        padded = pad_layout(tokens, positions, mask, size, self.pad_id)
        g = self._graphs.get(key)
        if g is None:
            if key not in self._seen:  # the first time: eager
                self._seen[key] = None
                while len(self._seen) > SEEN:
                    self._seen.popitem(last=False)
                return self.run(*padded)[:, :N]
            g = self._graphs[key] = self._capture(padded)
            while len(self._graphs) > self.keep:
                self._graphs.popitem(last=False)
        self._graphs.move_to_end(key)
        for static, new in zip(g.inputs, padded):
            static.copy_(new)
        g.graph.replay()
        return g.out[:, :N].clone()

    def _capture(self, padded) -> _Graph:
        inputs = tuple(x.clone() for x in padded)
        side = torch.cuda.Stream(device=inputs[0].device)
        side.wait_stream(torch.cuda.current_stream(inputs[0].device))
        with torch.cuda.stream(side):
            self.run(*inputs)  # warm-up off the capture (library handles, workspaces)
        torch.cuda.current_stream(inputs[0].device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = self.run(*inputs)
        self.captures += 1
        return _Graph(graph, inputs, out)
