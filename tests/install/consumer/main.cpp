// Uses the installed headers the way an engine would at a producer site.
#include <fp8scale/fp8scale.hpp>

#include <cstdio>
#include <vector>

int main() {
  using namespace fp8scale;
  const index_t M = 3, G = 2;
  std::vector<float> rowMajor = {1, 2, 3, 4, 5, 6};  // (M, G) row-major
  std::vector<float> colMajor(G * M);
  auto src = rowMajorView(rowMajor.data(), M, G).value();
  auto dst = materializeHost(src, colMajor.data(), M);
  if (!dst) return 1;
  const bool ok = emitTransposed(M, true) && dst.value()(2, 1) == 6.0f && colMajor[1] == 3.0f;
  std::printf("consumer: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
