// Workarounds that let Debian's HIP 5.2 headers compile device code under
// clang-22 with -nogpulib. Test tree only: force-included (-include) into the
// code-object build in this folder, never part of the library. Each piece
// fills a gap between what the old headers expect and what the new compiler
// provides; without ROCm's device libraries (ockl, opencl) nothing else would
// define these symbols and the link of the code object fails.
#pragma once

// clang-22 no longer predefines the macro; amd_warp_functions.h reads it for
// warpSize. gfx942 and gfx950 run wave64.
#ifndef __AMDGCN_WAVEFRONT_SIZE
#define __AMDGCN_WAVEFRONT_SIZE 64
#endif

// hip_fp16_math_fwd.h declares these only when clang's runtime wrapper is not
// in use, and clang-22's wrapper no longer declares them (only __2f16), so
// amd_hip_fp16.h (pulled in by rocPRIM) calls undeclared functions. They must
// be declared before that header is parsed, and defined (on the builtin that
// emits v_rcp_f16) because no device library provides them under -nogpulib.
extern "C" __device__ inline __attribute__((const)) _Float16 __llvm_amdgcn_rcp_f16(_Float16 x) {
  return __builtin_amdgcn_rcph(x);
}
extern "C" __device__ inline __2f16 __llvm_amdgcn_rcp_2f16(__2f16 x) {
  return __2f16{__llvm_amdgcn_rcp_f16(x.x), __llvm_amdgcn_rcp_f16(x.y)};
}

// The definitions below need the declarations and types of the HIP headers.
#include <hip/hip_runtime.h>

#if defined(__HIP_DEVICE_COMPILE__)

// threadIdx / blockIdx / blockDim call into ockl, which -nogpulib does not
// link. The compiler builtins read the same hardware registers and implicit
// kernel arguments. inline: folded into each kernel, no stray symbols.
extern "C" __device__ inline size_t __ockl_get_local_id(uint dim) {
  switch (dim) {
    case 0: return __builtin_amdgcn_workitem_id_x();
    case 1: return __builtin_amdgcn_workitem_id_y();
    case 2: return __builtin_amdgcn_workitem_id_z();
    default: return 0;
  }
}

extern "C" __device__ inline size_t __ockl_get_group_id(uint dim) {
  switch (dim) {
    case 0: return __builtin_amdgcn_workgroup_id_x();
    case 1: return __builtin_amdgcn_workgroup_id_y();
    case 2: return __builtin_amdgcn_workgroup_id_z();
    default: return 0;
  }
}

extern "C" __device__ inline size_t __ockl_get_local_size(uint dim) {
  switch (dim) {
    case 0: return __builtin_amdgcn_workgroup_size_x();
    case 1: return __builtin_amdgcn_workgroup_size_y();
    case 2: return __builtin_amdgcn_workgroup_size_z();
    default: return 1;
  }
}

// gridDim: workgroups per dimension, as ockl computes it (grid size in work
// items over the workgroup size, rounded up).
extern "C" __device__ inline size_t __ockl_get_num_groups(uint dim) {
  uint items = 0, group = 1;
  switch (dim) {
    case 0: items = __builtin_amdgcn_grid_size_x(); group = __builtin_amdgcn_workgroup_size_x(); break;
    case 1: items = __builtin_amdgcn_grid_size_y(); group = __builtin_amdgcn_workgroup_size_y(); break;
    case 2: items = __builtin_amdgcn_grid_size_z(); group = __builtin_amdgcn_workgroup_size_z(); break;
    default: return 1;
  }
  return (items + group - 1) / group;
}

// __syncthreads() fences through this OpenCL library function (hip.amdgcn.bc
// in ROCm). The builtin fence needs constant order and scope, which inlining
// provides at every call site in the HIP headers.
#define FP8SCALE_COMPAT_FENCE(order, scope)                                             \
  switch (order) {                                                                      \
    case __memory_order_acquire: __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, scope); break; \
    case __memory_order_release: __builtin_amdgcn_fence(__ATOMIC_RELEASE, scope); break; \
    case __memory_order_acq_rel: __builtin_amdgcn_fence(__ATOMIC_ACQ_REL, scope); break; \
    case __memory_order_seq_cst: __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, scope); break; \
    default: break; /* relaxed: no fence */                                             \
  }

extern "C" __device__ inline void __atomic_work_item_fence(__cl_mem_fence_flags, __memory_order order,
                                                          __memory_scope scope) {
  switch (scope) {
    case __memory_scope_work_item: break;
    case __memory_scope_sub_group: FP8SCALE_COMPAT_FENCE(order, "wavefront") break;
    case __memory_scope_work_group: FP8SCALE_COMPAT_FENCE(order, "workgroup") break;
    case __memory_scope_device: FP8SCALE_COMPAT_FENCE(order, "agent") break;
    default: FP8SCALE_COMPAT_FENCE(order, "") break;  // all_svm_devices: system scope
  }
}

#undef FP8SCALE_COMPAT_FENCE

// The fused producers call expf (SiLU) and rsqrtf (RMSNorm), which the HIP
// headers forward to ROCm's ocml library, absent here. Stand-ins on the
// compiler's own lowering: llvm.exp.f32 (expanded by the AMDGPU backend with
// v_exp_f32) and v_rsq_f32. They keep the code objects linkable for the
// register and spill checks; real ROCm builds link ocml instead.
extern "C" __device__ inline float __ocml_exp_f32(float x) { return __builtin_expf(x); }
extern "C" __device__ inline float __ocml_rsqrt_f32(float x) { return __builtin_amdgcn_rsqf(x); }

#endif  // __HIP_DEVICE_COMPILE__
