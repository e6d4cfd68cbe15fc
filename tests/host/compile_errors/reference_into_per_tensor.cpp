// expect: producers write RowMajor, ColMajor, PackedUe8m0 or Swizzled128x4 scales
// A producer asked to write one scale for the whole tensor: no producer
// computes a per-tensor scale, and the launchers and host references refuse
// the layout at compile time (detail::checkProducerOptions).
#include "fp8scale/reference/group_quant.hpp"

fp8scale::Status quantizeIntoOneScale(const float* x, std::uint8_t* q, float* s) {
  using namespace fp8scale;
  const auto one = perTensorView(s, 1, 2).value();
  return reference::groupQuant<E4M3FN, ScaleFp32>(x, 1, 256, 256, 128, Fp8Matrix<E4M3FN>{q, 1, 256, 256}, one);
}
