// expect: materializeHost takes RowMajor or ColMajor views
// Passing the packed layout where a RowMajor / ColMajor source is required.
#include "fp8scale/layout_policy.hpp"
void f(fp8scale::ScaleView<std::uint8_t, fp8scale::PackedUe8m0> v, std::uint8_t* dst) {
  (void)fp8scale::materializeHost(v, dst, 4);
}
