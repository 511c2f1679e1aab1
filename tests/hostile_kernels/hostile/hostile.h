// hostile: y = 2 * x + 1 over n float32 elements, with variants that misbehave on purpose
// (a test bed for the harness, not a shipped kernel). Plain C++ launcher, no torch headers.
#pragma once
#include <cuda_runtime.h>

enum HostileMode {
  HOSTILE_HONEST = 0,       // grid-stride kernel on the caller's stream
  HOSTILE_SIDE_STREAM = 1,  // same kernel on a private non-blocking stream, never joined to the caller's
  HOSTILE_CRASH = 2,        // writes far outside any allocation: sticky illegal-address error
  HOSTILE_HANG = 3,         // spins forever on a flag nothing sets
  HOSTILE_ASSERT = 4,       // device-side assert
  HOSTILE_PERSIST_L2 = 5,   // honest, but leaves a persisting-L2 limit and an access policy window set
  HOSTILE_GRAPH_COUNTER = 6,  // in a CUDA graph: works on one call in every hostile_set_graph_calls(n)
};

// How many calls of hostile-graph-counter the graph being captured holds (its binding counts them as
// it captures): kept in host memory the kernels read when the graph is replayed.
cudaError_t hostile_set_graph_calls(int calls);

// hostile-graph-batch: y[i] = 2 * x[i] + 1 for `count` calls' x and y (at most HOSTILE_MAX_BATCH) in one
// kernel, launched by the last call of a graph being captured: the calls of a replay overlap on the GPU.
constexpr int HOSTILE_MAX_BATCH = 128;
cudaError_t hostile_batch(const float* const* xs, float* const* ys, int count, long long n, cudaStream_t stream);

// `stream` is the caller's (PyTorch's current) stream; HOSTILE_SIDE_STREAM ignores it on purpose.
cudaError_t hostile_launch(int mode, const float* x, float* y, long long n, cudaStream_t stream);
