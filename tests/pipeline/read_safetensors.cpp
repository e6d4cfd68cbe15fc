// Reads a safetensors file the way fp8scale-pipeline's `--input` step does:
// validate the header, list the tensors, load the requested ones (all BF16 /
// F16 / F32 tensors when none is named) as fp32. The ctest runs over the
// broken files of tools/make_sample_safetensors.py --broken check that every
// one ends in a clear message and a non-zero exit, never a crash.
//
//   read_safetensors FILE [TENSOR...]
//   exit 0: read; 1: the file or a tensor was refused (message on stderr); 2: usage
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "pipeline/safetensors.hpp"

using fp8scale::pipeline::SafetensorsFile;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE.safetensors [TENSOR...]\n", argv[0]);
    return 2;
  }
  auto file = SafetensorsFile::open(argv[1]);
  if (!file) {
    std::fprintf(stderr, "error: %s\n", file.error().what.c_str());
    return 1;
  }
  const SafetensorsFile& f = file.value();
  std::printf("%s: %zu tensors, header %llu bytes, data %llu bytes\n", f.source().c_str(), f.tensors().size(),
              static_cast<unsigned long long>(f.headerBytes()),
              static_cast<unsigned long long>(f.dataBytes()));
  std::vector<std::string> wanted(argv + 2, argv + argc);
  for (const auto& t : f.tensors()) {
    std::string shape = "[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape[i]);
    std::printf("  %-28s %-5s %-16s bytes [%llu, %llu)\n", t.name.c_str(), dtypeName(t.dtype),
                (shape + "]").c_str(), static_cast<unsigned long long>(t.begin),
                static_cast<unsigned long long>(t.end));
    if (argc == 2 && isLoadableAsFloat(t.dtype)) wanted.push_back(t.name);
  }
  for (const std::string& name : wanted) {
    auto t = f.loadAsFloat(name);
    if (!t) {
      std::fprintf(stderr, "error: %s\n", t.error().what.c_str());
      return 1;
    }
    double sum = 0.0, absmax = 0.0;
    std::size_t nonFinite = 0;
    for (float v : t.value().values) {
      if (!std::isfinite(v)) {
        ++nonFinite;
        continue;
      }
      sum += v;
      absmax = std::fmax(absmax, std::fabs(v));
    }
    std::printf("loaded %s: %zu values, sum %.6g, absmax %.6g, %zu non-finite\n", name.c_str(),
                t.value().values.size(), sum, absmax, nonFinite);
  }
  return 0;
}
