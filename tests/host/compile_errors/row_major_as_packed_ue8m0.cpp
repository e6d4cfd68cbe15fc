// expect: deleted
// A row-major fp32 view re-viewed as packed exponents would scramble every
// scale: there is no such re-view (materializeHost converts).
#include "fp8scale/scale_view.hpp"
void f(fp8scale::ScaleView<float, fp8scale::RowMajor> v) { fp8scale::asPackedUe8m0(v); }
