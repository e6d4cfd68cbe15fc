// expect: hold UE8M0 exponent bytes
// The 128 x 4 tiled exponents read as fp32 scales: the view type refuses.
#include "fp8scale/scale_view.hpp"
fp8scale::ScaleView<const float, fp8scale::Swizzled128x4> v;
