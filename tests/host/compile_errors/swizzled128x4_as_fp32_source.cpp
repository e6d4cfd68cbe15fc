// expect: no matching function
// The tiled exponents are not an fp32 source for another exponent layout.
#include "fp8scale/layout_policy.hpp"
void f(fp8scale::ScaleView<const float, fp8scale::ColMajor> a, fp8scale::ScaleView<std::uint8_t, fp8scale::PackedUe8m0> p) {
  (void)fp8scale::materializeHost(a, p);  // fine
}
void g(fp8scale::ScaleView<std::uint8_t, fp8scale::Swizzled128x4> s, fp8scale::ScaleView<std::uint8_t, fp8scale::PackedUe8m0> p) {
  (void)fp8scale::materializeHost(s, p);
}
