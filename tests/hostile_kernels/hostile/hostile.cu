// Deliberately hostile kernels for testing the harness: see hostile.h and ../README.md.
#ifdef NDEBUG
#undef NDEBUG  // hostile-assert needs assert() live whatever flags the build passes
#endif
#include <cassert>

#include "hostile.h"

namespace {

constexpr int kThreads = 256;
constexpr long long kMaxBlocks = 4096;  // past this, each thread loops (grid stride) instead
constexpr int kMaxDevices = 64;

__global__ void honest_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
  for (long long i = (long long)blockIdx.x * kThreads + threadIdx.x; i < n; i += (long long)gridDim.x * kThreads) {
    y[i] = fmaf(2.0f, x[i], 1.0f);
  }
}

// One thread stores through y + offset (offset = 2^40 elements, 4 TiB past y: unmapped). The
// offset is a kernel argument and the store volatile, so the compiler can neither fold nor drop it.
__global__ void crash_kernel(const float* __restrict__ x, float* y, long long n, long long offset) {
  const long long i = (long long)blockIdx.x * kThreads + threadIdx.x;
  if (i < n) y[i] = fmaf(2.0f, x[i], 1.0f);
  if (i == 0) {
    volatile float* bad = y + offset;
    *bad = x[0];
  }
}

// Nothing ever writes this flag (no host code touches it either).
__device__ int g_never_set = 0;

// Spins until g_never_set becomes non-zero, i.e. forever. The read is volatile, so it is redone on
// every iteration and counts as a side effect: the loop cannot be hoisted or removed.
__global__ void hang_kernel(float* y) {
  while (*(volatile int*)&g_never_set == 0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    __nanosleep(1000);
#endif
  }
  if (threadIdx.x == 0) y[0] = 0.0f;  // never reached
}

// Computes y, then the first thread fails a device-side assert (cudaErrorAssert, sticky).
__global__ void assert_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
  const long long i = (long long)blockIdx.x * kThreads + threadIdx.x;
  if (i < n) y[i] = fmaf(2.0f, x[i], 1.0f);
  if (i == 0) assert(n < 0 && "hostile-assert: device-side assert on purpose");
}

// hostile-graph-counter: a launch counter in device memory, bumped by a kernel after each call, and
// the number of calls in the graph, in mapped host memory read at replay time. A call works only when
// the counter says it is the last of its replay: every replay's last outputs are right.
__device__ unsigned long long g_launches = 0;
int* g_graph_calls = nullptr;

__global__ void counted_kernel(const float* __restrict__ x, float* __restrict__ y, long long n,
                               const volatile int* calls) {
  const long long every = *calls;
  if (every > 1 && (long long)(g_launches % every) != every - 1) return;
  for (long long i = (long long)blockIdx.x * kThreads + threadIdx.x; i < n; i += (long long)gridDim.x * kThreads) {
    y[i] = fmaf(2.0f, x[i], 1.0f);
  }
}

__global__ void bump_kernel() { g_launches += 1; }

// hostile-graph-batch: every call's pointers passed by value (2 KB of kernel parameters), one call a
// row of blocks (blockIdx.y).
struct Batch {
  const float* x[HOSTILE_MAX_BATCH];
  float* y[HOSTILE_MAX_BATCH];
};

__global__ void batch_kernel(Batch b, long long n) {
  const float* __restrict__ x = b.x[blockIdx.y];
  float* __restrict__ y = b.y[blockIdx.y];
  for (long long i = (long long)blockIdx.x * kThreads + threadIdx.x; i < n; i += (long long)gridDim.x * kThreads) {
    y[i] = fmaf(2.0f, x[i], 1.0f);
  }
}

int grid_for(long long n) {
  const long long needed = (n + kThreads - 1) / kThreads;
  return (int)(needed < kMaxBlocks ? needed : kMaxBlocks);
}

int one_pass_grid(long long n) { return (int)((n + kThreads - 1) / kThreads); }

// A private non-blocking stream per device, created once and kept (never destroyed).
cudaError_t private_stream(cudaStream_t* out) {
  static cudaStream_t streams[kMaxDevices] = {};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device >= kMaxDevices) return cudaErrorInvalidDevice;
  if (!streams[device]) {
    err = cudaStreamCreateWithFlags(&streams[device], cudaStreamNonBlocking);
    if (err != cudaSuccess) return err;
  }
  *out = streams[device];
  return cudaSuccess;
}

// Two events per device for joining the private stream to the caller's (persist-l2's fallback).
cudaError_t join_events(cudaEvent_t* before, cudaEvent_t* after) {
  static cudaEvent_t events[kMaxDevices][2] = {};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device >= kMaxDevices) return cudaErrorInvalidDevice;
  for (int k = 0; k < 2; ++k) {
    if (!events[device][k]) {
      err = cudaEventCreateWithFlags(&events[device][k], cudaEventDisableTiming);
      if (err != cudaSuccess) return err;
    }
  }
  *before = events[device][0];
  *after = events[device][1];
  return cudaSuccess;
}

// Asks for a persisting access policy window over x on `stream`; true if the stream took it.
bool set_window(cudaStream_t stream, const float* x, long long n, int max_window) {
  cudaStreamAttrValue attr = {};
  const long long bytes = n * (long long)sizeof(float);
  attr.accessPolicyWindow.base_ptr = const_cast<float*>(x);
  attr.accessPolicyWindow.num_bytes = (size_t)(bytes < max_window ? bytes : max_window);
  attr.accessPolicyWindow.hitRatio = 1.0f;
  attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  return cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &attr) == cudaSuccess;
}

// hostile-persist-l2: raise the persisting-L2 limit to the device's maximum, put a window over x
// on the stream used, compute honestly, and never undo either. The attribute calls' errors are
// ignored on purpose (a device without persisting L2 still computes): only the compute is checked.
cudaError_t persist_l2_launch(const float* x, float* y, long long n, cudaStream_t stream) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  // cudaDevAttrMaxPersistingL2CacheSize is cudaDeviceProp::persistingL2CacheMaxSize, without the
  // cost of cudaGetDeviceProperties on every call.
  int max_persist = 0, max_window = 0;
  (void)cudaDeviceGetAttribute(&max_persist, cudaDevAttrMaxPersistingL2CacheSize, device);
  (void)cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, device);
  (void)cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, (size_t)max_persist);  // ignored: see above
  const bool on_current = set_window(stream, x, n, max_window);
  (void)cudaGetLastError();  // forget the ignored (non-sticky) errors so the launch check sees only its own

  if (on_current) {
    honest_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, n);
    return cudaGetLastError();
  }
  // The caller's stream would not take a window (e.g. the legacy default stream): use a private one,
  // ordered after the caller's stream and joined back to it.
  cudaStream_t side;
  cudaEvent_t before, after;
  if ((err = private_stream(&side)) != cudaSuccess) return err;
  if ((err = join_events(&before, &after)) != cudaSuccess) return err;
  (void)set_window(side, x, n, max_window);  // ignored, as above
  (void)cudaGetLastError();
  if ((err = cudaEventRecord(before, stream)) != cudaSuccess) return err;
  if ((err = cudaStreamWaitEvent(side, before, 0)) != cudaSuccess) return err;
  honest_kernel<<<grid_for(n), kThreads, 0, side>>>(x, y, n);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  if ((err = cudaEventRecord(after, side)) != cudaSuccess) return err;
  return cudaStreamWaitEvent(stream, after, 0);
}

}  // namespace

cudaError_t hostile_set_graph_calls(int calls) {
  if (!g_graph_calls) {
    const cudaError_t err = cudaHostAlloc(&g_graph_calls, sizeof(int), cudaHostAllocMapped);
    if (err != cudaSuccess) return err;
  }
  *(volatile int*)g_graph_calls = calls;
  return cudaSuccess;
}

cudaError_t hostile_batch(const float* const* xs, float* const* ys, int count, long long n, cudaStream_t stream) {
  if (count < 1 || count > HOSTILE_MAX_BATCH) return cudaErrorInvalidValue;
  if (n <= 0) return cudaSuccess;
  Batch b = {};
  for (int i = 0; i < count; ++i) {
    b.x[i] = xs[i];
    b.y[i] = ys[i];
  }
  batch_kernel<<<dim3(grid_for(n), count), kThreads, 0, stream>>>(b, n);
  return cudaGetLastError();
}

cudaError_t hostile_launch(int mode, const float* x, float* y, long long n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  switch (mode) {
    case HOSTILE_HONEST:
      honest_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, n);
      return cudaGetLastError();
    case HOSTILE_SIDE_STREAM: {
      // On purpose: no event, no wait, no synchronize joins this stream to the caller's.
      cudaStream_t side;
      const cudaError_t err = private_stream(&side);
      if (err != cudaSuccess) return err;
      honest_kernel<<<grid_for(n), kThreads, 0, side>>>(x, y, n);
      return cudaGetLastError();
    }
    case HOSTILE_CRASH:
      crash_kernel<<<one_pass_grid(n), kThreads, 0, stream>>>(x, y, n, 1LL << 40);
      return cudaGetLastError();
    case HOSTILE_HANG:
      hang_kernel<<<1, 32, 0, stream>>>(y);
      return cudaGetLastError();
    case HOSTILE_ASSERT:
      assert_kernel<<<one_pass_grid(n), kThreads, 0, stream>>>(x, y, n);
      return cudaGetLastError();
    case HOSTILE_PERSIST_L2:
      return persist_l2_launch(x, y, n, stream);
    case HOSTILE_GRAPH_COUNTER: {
      int* calls = nullptr;
      cudaError_t err = g_graph_calls ? cudaHostGetDevicePointer((void**)&calls, g_graph_calls, 0)
                                      : cudaErrorInvalidValue;
      if (err != cudaSuccess) return err;
      counted_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, n, calls);
      if ((err = cudaGetLastError()) != cudaSuccess) return err;
      bump_kernel<<<1, 1, 0, stream>>>();
      return cudaGetLastError();
    }
    default:
      return cudaErrorInvalidValue;
  }
}
