// A reference header that breaks each header rule; with apps/program.cpp
// every rule of check_structure.py must report a problem
// (structure_finds_violations in tests/CMakeLists.txt).
#pragma once
#include "../producers/kernel.hpp"
#if defined(__CUDA_ARCH__)
#endif
#if defined(FP8SCALE_HAS_DEVICE)
#endif
#include <fp8scale/producers/kernel.hpp>
__device__ inline float half(float v) { return v * 0.5f; }
inline void zeroPadding(float* s, long g, long ld, long m) { s[g * ld + m] = 0.0f; }
inline void zeroPaddingToo(float* s, long g, long ld, long m) { s[m + g * ld] = 0.0f; }
