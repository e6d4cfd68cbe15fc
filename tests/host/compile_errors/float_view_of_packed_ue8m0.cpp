// expect: hold UE8M0 exponent bytes
// Packed exponent words read as fp32 scales: the view type refuses.
#include "fp8scale/scale_view.hpp"
fp8scale::ScaleView<float, fp8scale::PackedUe8m0> v;
