// expect: deleted
// One UE8M0 byte a slot in column-major order is not the tiled layout.
#include "fp8scale/scale_view.hpp"
void f(fp8scale::ScaleView<std::uint8_t, fp8scale::ColMajor> v) { fp8scale::asSwizzled128x4(v); }
