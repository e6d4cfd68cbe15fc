// A reference header that breaks each header rule once; with apps/program.cpp
// check_structure.py must report five problems (structure_finds_violations
// in tests/CMakeLists.txt).
#pragma once
#include "../producers/kernel.hpp"
#if defined(__CUDA_ARCH__)
#endif
#if defined(FP8SCALE_HAS_DEVICE)
#endif
inline void zeroPadding(float* s, long g, long ld, long m) { s[g * ld + m] = 0.0f; }
