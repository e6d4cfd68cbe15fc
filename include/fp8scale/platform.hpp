// fp8scale: the one place for HIP / CUDA / host-only differences.
//
// Everything else in the library includes this header and never tests a vendor
// macro itself. Three build modes:
//   - FP8SCALE_PLATFORM_HIP   : compiled by hipcc / clang -x hip (AMD GPUs)
//   - FP8SCALE_PLATFORM_CUDA  : compiled by nvcc / clang -x cuda (NVIDIA GPUs)
//   - FP8SCALE_PLATFORM_HOST  : any C++17 compiler; no kernels, host references
//                               and layout types only.
// FP8SCALE_DEVICE_PASS is 1 while the compiler generates device code (the
// device half of a CUDA/HIP compile), 0 otherwise.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>

#if defined(__HIP__) || defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#define FP8SCALE_PLATFORM_HIP 1
#include <hip/hip_runtime.h>
#elif defined(__CUDACC__)
#define FP8SCALE_PLATFORM_CUDA 1
#include <cuda_runtime.h>
#else
#define FP8SCALE_PLATFORM_HOST 1
#endif

#if defined(FP8SCALE_PLATFORM_HIP) || defined(FP8SCALE_PLATFORM_CUDA)
#define FP8SCALE_HAS_DEVICE 1
#endif

#if defined(__HIP_DEVICE_COMPILE__) || defined(__CUDA_ARCH__)
#define FP8SCALE_DEVICE_PASS 1
#else
#define FP8SCALE_DEVICE_PASS 0
#endif

// Annotations. Overridable, as in rocPRIM, for projects that wrap them.
#ifndef FP8SCALE_HOST_DEVICE
#if defined(FP8SCALE_HAS_DEVICE)
#define FP8SCALE_HOST_DEVICE __host__ __device__
#else
#define FP8SCALE_HOST_DEVICE
#endif
#endif

#ifndef FP8SCALE_DEVICE
#if defined(FP8SCALE_HAS_DEVICE)
#define FP8SCALE_DEVICE __device__
#endif
#endif

#if defined(FP8SCALE_HAS_DEVICE)
#define FP8SCALE_GLOBAL __global__
#define FP8SCALE_FORCEINLINE __forceinline__
#else
#define FP8SCALE_FORCEINLINE inline
#endif

// Which hardware fp8 conversion the current device pass has (0 on the host
// pass and on targets without one):
//   FP8SCALE_HW_CVT_E4M3FN   : cvt.rn.satfinite.e4m3x2.f32 (sm_89+) or
//                              v_cvt_pk_fp8_f32 in OCP mode (gfx950)
//   FP8SCALE_HW_CVT_E4M3FNUZ : v_cvt_pk_fp8_f32 in FNUZ mode (gfx940/941/942)
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 890)
#define FP8SCALE_HW_CVT_E4M3FN 1
#define FP8SCALE_HW_CVT_PTX 1
#elif defined(__HIP_DEVICE_COMPILE__) && defined(__gfx950__)
#define FP8SCALE_HW_CVT_E4M3FN 1
#define FP8SCALE_HW_CVT_AMDGCN 1
#elif defined(__HIP_DEVICE_COMPILE__) && \
    (defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__))
#define FP8SCALE_HW_CVT_E4M3FNUZ 1
#define FP8SCALE_HW_CVT_AMDGCN 1
#endif
#ifndef FP8SCALE_HW_CVT_E4M3FN
#define FP8SCALE_HW_CVT_E4M3FN 0
#endif
#ifndef FP8SCALE_HW_CVT_E4M3FNUZ
#define FP8SCALE_HW_CVT_E4M3FNUZ 0
#endif

// Stores with an L2 cache policy (createpolicy + st.global.L2::cache_hint):
// sm_80+ and PTX ISA 7.4 (CUDA 11.4). 1 only on such a device pass; scale
// stores are plain stores elsewhere (AMD, older NVIDIA, the host pass).
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800) && defined(__CUDACC_VER_MAJOR__) && \
    (__CUDACC_VER_MAJOR__ * 100 + __CUDACC_VER_MINOR__ >= 1104)
#define FP8SCALE_HAS_L2_CACHE_HINT 1
#else
#define FP8SCALE_HAS_L2_CACHE_HINT 0
#endif

// Rounding fp32 pairs to bf16 / fp16 with one cvt.rn.bf16x2.f32 /
// cvt.rn.f16x2.f32 (F2FP): an NVIDIA sm_80+ device pass. 0 elsewhere.
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
#define FP8SCALE_HAS_F2FP_ROUNDING 1
#else
#define FP8SCALE_HAS_F2FP_ROUNDING 0
#endif

// An NVIDIA device pass, whose fp32 division under --use_fast_math is not
// IEEE unless asked for (__fdiv_rn). 0 on AMD and on the host pass.
#if defined(__CUDA_ARCH__)
#define FP8SCALE_CUDA_DEVICE_PASS 1
#else
#define FP8SCALE_CUDA_DEVICE_PASS 0
#endif

namespace fp8scale {

/// Signed 64-bit index used for every extent, stride and offset: M * K of a
/// large activation exceeds 2^31.
using index_t = std::int64_t;

/// Launch limits of a 1-D grid: at most kMaxGridBlocks blocks (CUDA and HIP),
/// and on HIP at most kMaxGridThreads threads in all (gridDim.x * blockDim.x
/// must fit in 32 bits there).
constexpr index_t kMaxGridBlocks = 2147483647;
#if defined(FP8SCALE_PLATFORM_HIP)
constexpr index_t kMaxGridThreads = 4294967295;
#else
constexpr index_t kMaxGridThreads = kMaxGridBlocks * 1024;
#endif

/// gridDim.y limit (CUDA's 65535; HIP allows more, the smaller bound is kept).
constexpr index_t kMaxGridY = 65535;

namespace detail {
/// The hardware warp width of the device pass: 64 on AMD's gfx9 (wave64), 32
/// on NVIDIA; host-only builds take NVIDIA's, so that launch plans computed
/// on the host (rmsNormQuantLaunch) match a CUDA build's.
#if defined(FP8SCALE_PLATFORM_HIP)
constexpr int kWarpSize = 64;
#else
constexpr int kWarpSize = 32;
#endif
#if defined(FP8SCALE_PLATFORM_HIP) && defined(__AMDGCN_WAVEFRONT_SIZE)
static_assert(__AMDGCN_WAVEFRONT_SIZE == kWarpSize, "fp8scale's AMD kernels are written for wave64 (gfx9)");
#endif
}  // namespace detail

/// Whether a 1-D launch of `blocks` blocks of `threads` threads fits the limits.
constexpr bool fitsOneGrid(index_t blocks, index_t threads) {
  return blocks <= kMaxGridBlocks && blocks * threads <= kMaxGridThreads;
}

/// Bit cast without UB, usable in device code (std::bit_cast is C++20).
template <class To, class From>
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE To bitCast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bitCast needs equal sizes");
  static_assert(std::is_trivially_copyable<From>::value &&
                    std::is_trivially_copyable<To>::value,
                "bitCast needs trivially copyable types");
  To to;
  __builtin_memcpy(&to, &from, sizeof(To));
  return to;
}

#if defined(FP8SCALE_PLATFORM_HIP)
using Stream = hipStream_t;
using DeviceError = hipError_t;
constexpr DeviceError kDeviceSuccess = hipSuccess;
inline const char* deviceErrorString(DeviceError e) { return hipGetErrorString(e); }
inline DeviceError deviceLastError() { return hipGetLastError(); }
#elif defined(FP8SCALE_PLATFORM_CUDA)
using Stream = cudaStream_t;
using DeviceError = cudaError_t;
constexpr DeviceError kDeviceSuccess = cudaSuccess;
inline const char* deviceErrorString(DeviceError e) { return cudaGetErrorString(e); }
inline DeviceError deviceLastError() { return cudaGetLastError(); }
#else
/// Host-only builds have no streams; the type exists so that signatures match.
using Stream = void*;
using DeviceError = int;
constexpr DeviceError kDeviceSuccess = 0;
inline const char* deviceErrorString(DeviceError) { return "no device runtime"; }
inline DeviceError deviceLastError() { return 0; }
/// Host-only builds never reach a device memset (no launcher exists there).
inline DeviceError deviceMemsetAsync(void*, int, std::size_t, Stream) { return 1; }
#endif

/// What the layout policy needs to know about a device. Filled from the
/// runtime's device properties by queryDevice(), or by hand in host tests.
struct DeviceInfo {
  bool isAmd = false;
  /// AMD: the full gcnArchName, e.g. "gfx950:sramecc+:xnack-". Empty on NVIDIA.
  std::string archName;
  /// NVIDIA: compute capability (9, 0) for Hopper. 0 on AMD.
  int ccMajor = 0;
  int ccMinor = 0;
  int multiProcessorCount = 0;
};

#if defined(FP8SCALE_HAS_DEVICE)
/// Reads the properties of `device` from the runtime. Returns the runtime's
/// error code; `info` is left untouched on failure.
inline DeviceError queryDevice(int device, DeviceInfo& info) {
#if defined(FP8SCALE_PLATFORM_HIP)
  hipDeviceProp_t p;
  DeviceError e = hipGetDeviceProperties(&p, device);
  if (e != hipSuccess) return e;
  info.isAmd = true;
  info.archName = p.gcnArchName;
  info.ccMajor = 0;
  info.ccMinor = 0;
  info.multiProcessorCount = p.multiProcessorCount;
#else
  int major = 0, minor = 0, sms = 0;
  DeviceError e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return e;
  info.isAmd = false;
  info.archName.clear();
  info.ccMajor = major;
  info.ccMinor = minor;
  info.multiProcessorCount = sms;
#endif
  return kDeviceSuccess;
}

/// Asynchronous memset of device memory on `stream`.
inline DeviceError deviceMemsetAsync(void* ptr, int value, std::size_t bytes, Stream stream) {
#if defined(FP8SCALE_PLATFORM_HIP)
  return hipMemsetAsync(ptr, value, bytes, stream);
#else
  return cudaMemsetAsync(ptr, value, bytes, stream);
#endif
}

/// Launches `kernel<<<grid, block, smem, stream>>>(args...)` and returns the
/// launch error (configuration errors, missing code object). Does not
/// synchronize: execution errors surface at the caller's next sync.
template <class... KernelArgs, class... Args>
inline DeviceError launchKernel(void (*kernel)(KernelArgs...), dim3 grid, dim3 block,
                                std::size_t sharedBytes, Stream stream, Args&&... args) {
  kernel<<<grid, block, sharedBytes, stream>>>(static_cast<KernelArgs>(args)...);
  return deviceLastError();
}

/// The runtime calls the tests, benchmarks and programs make, one spelling
/// for both vendors, so that one harness source compiles as CUDA and as HIP.
/// Each calls the CUDA / HIP runtime function of the same name
/// (runtime::memcpy is cudaMemcpy / hipMemcpy) and returns its error code.
/// The arguments are the runtime's, except where a wrapper fixes a choice:
/// a Copy direction instead of the memcpy kind, streamCreate's `nonBlocking`
/// flag, thread-local capture, graphs instantiated without flags.
namespace runtime {
#if defined(FP8SCALE_PLATFORM_HIP)
#define FP8SCALE_RT(name) hip##name
#else
#define FP8SCALE_RT(name) cuda##name
#endif
using Event = FP8SCALE_RT(Event_t);
using Graph = FP8SCALE_RT(Graph_t);
using GraphExec = FP8SCALE_RT(GraphExec_t);
/// The runtime's "invalid argument" code, for callers that report their own misuse.
constexpr DeviceError kErrorInvalidValue = FP8SCALE_RT(ErrorInvalidValue);

/// Direction of a copy (cudaMemcpyKind / hipMemcpyKind).
enum class Copy { HostToDevice, DeviceToHost, DeviceToDevice };
inline FP8SCALE_RT(MemcpyKind) copyKind(Copy c) {
  switch (c) {
    case Copy::HostToDevice: return FP8SCALE_RT(MemcpyHostToDevice);
    case Copy::DeviceToHost: return FP8SCALE_RT(MemcpyDeviceToHost);
    default: return FP8SCALE_RT(MemcpyDeviceToDevice);
  }
}

inline DeviceError malloc(void** p, std::size_t bytes) { return FP8SCALE_RT(Malloc)(p, bytes); }
template <class T>
inline DeviceError malloc(T** p, std::size_t bytes) {
  return malloc(reinterpret_cast<void**>(p), bytes);
}
inline DeviceError free(void* p) { return FP8SCALE_RT(Free)(p); }
inline DeviceError memcpy(void* dst, const void* src, std::size_t bytes, Copy c) {
  return FP8SCALE_RT(Memcpy)(dst, src, bytes, copyKind(c));
}
inline DeviceError memcpyAsync(void* dst, const void* src, std::size_t bytes, Copy c, Stream s) {
  return FP8SCALE_RT(MemcpyAsync)(dst, src, bytes, copyKind(c), s);
}
/// On device memory it may return before the bytes are written, and work on
/// a non-blocking stream does not wait for it: follow it with
/// deviceSynchronize() before such work reads them.
inline DeviceError memset(void* p, int byte, std::size_t bytes) { return FP8SCALE_RT(Memset)(p, byte, bytes); }
inline DeviceError deviceSynchronize() { return FP8SCALE_RT(DeviceSynchronize)(); }
inline DeviceError getDeviceCount(int* n) { return FP8SCALE_RT(GetDeviceCount)(n); }
inline DeviceError getDevice(int* d) { return FP8SCALE_RT(GetDevice)(d); }
inline DeviceError setDevice(int d) { return FP8SCALE_RT(SetDevice)(d); }

/// A stream; `nonBlocking`: it does not wait for the legacy default stream.
inline DeviceError streamCreate(Stream* s, bool nonBlocking) {
  return FP8SCALE_RT(StreamCreateWithFlags)(s, nonBlocking ? FP8SCALE_RT(StreamNonBlocking) : FP8SCALE_RT(StreamDefault));
}
inline DeviceError streamDestroy(Stream s) { return FP8SCALE_RT(StreamDestroy)(s); }
inline DeviceError streamSynchronize(Stream s) { return FP8SCALE_RT(StreamSynchronize)(s); }

inline DeviceError eventCreate(Event* e) { return FP8SCALE_RT(EventCreate)(e); }
inline DeviceError eventDestroy(Event e) { return FP8SCALE_RT(EventDestroy)(e); }
inline DeviceError eventRecord(Event e, Stream s) { return FP8SCALE_RT(EventRecord)(e, s); }
inline DeviceError eventSynchronize(Event e) { return FP8SCALE_RT(EventSynchronize)(e); }
/// Milliseconds from `start` to `stop`, both recorded and complete.
inline DeviceError eventElapsedTime(float* ms, Event start, Event stop) {
  return FP8SCALE_RT(EventElapsedTime)(ms, start, stop);
}

/// Stream capture into a graph (thread-local mode), and its replay.
inline DeviceError streamBeginCapture(Stream s) {
  return FP8SCALE_RT(StreamBeginCapture)(s, FP8SCALE_RT(StreamCaptureModeThreadLocal));
}
inline DeviceError streamEndCapture(Stream s, Graph* g) { return FP8SCALE_RT(StreamEndCapture)(s, g); }
inline DeviceError graphInstantiate(GraphExec* exec, Graph g) {
  return FP8SCALE_RT(GraphInstantiateWithFlags)(exec, g, 0);
}
inline DeviceError graphLaunch(GraphExec exec, Stream s) { return FP8SCALE_RT(GraphLaunch)(exec, s); }
inline DeviceError graphDestroy(Graph g) { return FP8SCALE_RT(GraphDestroy)(g); }
inline DeviceError graphExecDestroy(GraphExec exec) { return FP8SCALE_RT(GraphExecDestroy)(exec); }

/// The largest dynamic shared memory one block of `device` may opt in to
/// (NVIDIA: above the 48 KiB default; AMD: the LDS per workgroup, no opt-in).
inline DeviceError maxSharedBytesPerBlock(int* bytes, int device) {
#if defined(FP8SCALE_PLATFORM_HIP)
  return hipDeviceGetAttribute(bytes, hipDeviceAttributeMaxSharedMemoryPerBlock, device);
#else
  return cudaDeviceGetAttribute(bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
#endif
}
/// Lets `kernel` launch with up to `bytes` of dynamic shared memory.
template <class... KernelArgs>
inline DeviceError allowSharedBytes(void (*kernel)(KernelArgs...), int bytes) {
  return FP8SCALE_RT(FuncSetAttribute)(reinterpret_cast<const void*>(kernel),
                                       FP8SCALE_RT(FuncAttributeMaxDynamicSharedMemorySize), bytes);
}
#undef FP8SCALE_RT
}  // namespace runtime

namespace detail {

// The runtime calls only the allreduce communicator needs (IPC handles,
// occupancy), one spelling per vendor.
#if defined(FP8SCALE_PLATFORM_HIP)
using IpcMemHandle = hipIpcMemHandle_t;
inline DeviceError devIpcGet(IpcMemHandle* h, void* p) { return hipIpcGetMemHandle(h, p); }
inline DeviceError devIpcOpen(void** p, const IpcMemHandle& h) {
  return hipIpcOpenMemHandle(p, h, hipIpcMemLazyEnablePeerAccess);
}
inline DeviceError devIpcClose(void* p) { return hipIpcCloseMemHandle(p); }
template <class Kernel>
inline DeviceError devBlocksPerSm(int* n, Kernel kernel, int threads) {
  hipFuncAttributes attr;
  const DeviceError e = hipFuncGetAttributes(&attr, reinterpret_cast<const void*>(kernel));
  if (e != hipSuccess) return e;
  return hipOccupancyMaxActiveBlocksPerMultiprocessor(n, reinterpret_cast<const void*>(kernel), threads, 0);
}
#else
using IpcMemHandle = cudaIpcMemHandle_t;
inline DeviceError devIpcGet(IpcMemHandle* h, void* p) { return cudaIpcGetMemHandle(h, p); }
inline DeviceError devIpcOpen(void** p, const IpcMemHandle& h) {
  return cudaIpcOpenMemHandle(p, h, cudaIpcMemLazyEnablePeerAccess);
}
inline DeviceError devIpcClose(void* p) { return cudaIpcCloseMemHandle(p); }
/// Co-resident blocks of `kernel` per SM. cudaFuncGetAttributes first: it
/// loads the kernel now, so that lazy module loading never has to load it
/// (and maybe synchronize) while another rank's kernel spins.
template <class Kernel>
inline DeviceError devBlocksPerSm(int* n, Kernel kernel, int threads) {
  cudaFuncAttributes attr;
  const DeviceError e = cudaFuncGetAttributes(&attr, kernel);
  if (e != cudaSuccess) return e;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, kernel, threads, 0);
}
#endif

/// Blocks per SM of `kernel` at `threads` threads on `device`, queried once
/// per (kernel, device) and cached (a mutex-guarded map: launchers consult it
/// only for grids larger than the device holds at once).
template <class Kernel>
inline DeviceError cachedBlocksPerSm(int* n, Kernel kernel, int threads, int device) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, int> cache;
  const std::pair<const void*, int> key{reinterpret_cast<const void*>(kernel), device};
  std::lock_guard<std::mutex> lock(mutex);
  const auto it = cache.find(key);
  if (it != cache.end()) {
    *n = it->second;
    return kDeviceSuccess;
  }
  const DeviceError e = devBlocksPerSm(n, kernel, threads);
  if (e == kDeviceSuccess) cache.emplace(key, *n);
  return e;
}

/// SMs (CUs) of the current device in *n, and its ordinal in *device;
/// queried once per device and cached.
inline DeviceError cachedSmCount(int* n, int* device) {
  DeviceError e = runtime::getDevice(device);
  if (e != kDeviceSuccess) return e;
  static std::mutex mutex;
  static std::map<int, int> sms;
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = sms.find(*device);
    if (it != sms.end()) {
      *n = it->second;
      return kDeviceSuccess;
    }
  }
  DeviceInfo info;
  e = queryDevice(*device, info);
  if (e != kDeviceSuccess) return e;
  *n = info.multiProcessorCount;
  std::lock_guard<std::mutex> lock(mutex);
  sms[*device] = *n;
  return kDeviceSuccess;
}

/// Blocks of `kernel` (at `threads` threads) the current device runs at once:
/// blocks per SM x SMs, both cached per device.
template <class Kernel>
inline DeviceError residentBlocks(int* n, Kernel kernel, int threads) {
  int device = 0, smCount = 0;
  DeviceError e = cachedSmCount(&smCount, &device);
  if (e != kDeviceSuccess) return e;
  int perSm = 0;
  e = cachedBlocksPerSm(&perSm, kernel, threads, device);
  if (e != kDeviceSuccess) return e;
  *n = perSm * smCount;
  return kDeviceSuccess;
}

}  // namespace detail

/// launchKernel with programmatic dependent launch (PDL) when
/// `programmaticDependent` is set and the platform has it (CUDA, sm_90+): the
/// grid may be scheduled while the previous kernel on the stream finishes; the
/// kernel must call gridDependencyWait() before it touches memory the
/// previous kernel writes or reads. Works under stream capture (a
/// programmatic graph edge). On HIP the flag is ignored (plain launch).
template <class... KernelArgs, class... Args>
inline DeviceError launchKernelPdl(bool programmaticDependent, void (*kernel)(KernelArgs...), dim3 grid, dim3 block,
                                   std::size_t sharedBytes, Stream stream, Args&&... args) {
#if defined(FP8SCALE_PLATFORM_CUDA)
  if (programmaticDependent) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = sharedBytes;
    config.stream = stream;
    config.attrs = attr;
    config.numAttrs = 1;
    const DeviceError e = cudaLaunchKernelEx(&config, kernel, static_cast<KernelArgs>(args)...);
    (void)cudaGetLastError();  // clear it, so that the next launch reports only its own error
    return e;
  }
#endif
  (void)programmaticDependent;
  return launchKernel(kernel, grid, block, sharedBytes, stream, static_cast<Args&&>(args)...);
}

namespace detail {

// System-scope flag accesses (the allreduce's signals) and a clock.

FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void storeReleaseSystem(std::uint64_t* p, std::uint64_t v) {
#if defined(FP8SCALE_PLATFORM_HIP)
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#endif
}

FP8SCALE_DEVICE FP8SCALE_FORCEINLINE std::uint64_t loadAcquireSystem(const std::uint64_t* p) {
#if defined(FP8SCALE_PLATFORM_HIP)
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  std::uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#endif
}

FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void storeRelaxedSystem(std::uint32_t* p, std::uint32_t v) {
#if defined(FP8SCALE_PLATFORM_HIP)
  __hip_atomic_store(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#endif
}

FP8SCALE_DEVICE FP8SCALE_FORCEINLINE std::uint32_t loadRelaxedSystem(const std::uint32_t* p) {
#if defined(FP8SCALE_PLATFORM_HIP)
  return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  std::uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#endif
}

/// Nanoseconds from a free-running device clock (%globaltimer on NVIDIA; the
/// 100 MHz s_memrealtime counter on AMD), for spin limits only.
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE std::uint64_t deviceNanoseconds() {
#if defined(FP8SCALE_PLATFORM_HIP)
  return __builtin_amdgcn_s_memrealtime() * 10u;
#else
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#endif
}

/// A short pause between polls, after the first ones.
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void spinPause() {
#if defined(FP8SCALE_PLATFORM_HIP)
  __builtin_amdgcn_s_sleep(1);
#else
  __nanosleep(64);
#endif
}

}  // namespace detail

/// Device side of PDL. gridDependencyWait(): returns once the preceding grid
/// has completed and its memory is visible (griddepcontrol.wait; a no-op when
/// the grid was launched without PDL, and on AMD). allowDependentLaunch(): lets
/// the next PDL-launched grid be scheduled now (griddepcontrol.launch_dependents);
/// that grid still waits for this one to complete before its own memory access.
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void gridDependencyWait() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void allowDependentLaunch() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
#endif

}  // namespace fp8scale
