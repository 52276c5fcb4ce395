"""Legitimate (GPU): the launch recorded once in a CUDA graph per set of buffers, then replayed.

The first call on a given (a, b, out) captures the kernel's launch on those pointers; every call,
that one included, replays the graph, so each output is computed afresh from the call's contents.
Keyed by pointers, like a cache of answers, but what it keeps is the launch, not a result."""
import torch

from sandbox.native import load_cuda

lib = load_cuda(r'''
#include <cstdint>
#include <cuda_runtime.h>
__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
extern "C" void add_on(const float* a, const float* b, float* out, int64_t n, void* stream) {
  if (n > 0) add_kernel<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(a, b, out, n);
}
''', name="graphreplay")
_graphs: dict[tuple[int, int, int, int], torch.cuda.CUDAGraph] = {}


def custom_kernel(data):
    a, b, out = data
    key = (a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel())
    graph = _graphs.get(key)
    if graph is None:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            lib.add_on(a, b, out, a.numel(), torch.cuda.current_stream().cuda_stream)
        _graphs[key] = graph
    graph.replay()
    return out
