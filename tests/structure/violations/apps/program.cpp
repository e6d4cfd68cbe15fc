// A program that includes a helper from benchmarks/.
#include "timing.cuh"
