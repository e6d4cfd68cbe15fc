# The HIP toolchain of this build: its C++ compiler, a HIP clang (ROCm's
# amdclang++, or Debian's clang++-22), compiles .cu sources as HIP for each
# of FP8SCALE_HIP_ARCHS and links them against libamdhip64 (docs/amd.md).
# Included by tests/CMakeLists.txt when FP8SCALE_HIP is on; defines
# fp8scale_hip_executable(name sources...), used by tests/hip and
# apps/pipeline.
#
#   FP8SCALE_HIP_ARCHS     gfx942 (MI300X) and gfx950 (MI355X) by default
#   FP8SCALE_HIP_NOGPULIB  OFF: link ROCm's device libraries (a ROCm install).
#                          ON: Debian's HIP 5.2 packages, which have none for
#                          these archs: -nogpulib, and tests/isa/hip_compat.h
#                          supplies what the headers need from them. Such a
#                          build compiles and links, and runs only what needs
#                          no GPU.
#   ROCM_PATH              where to look for the HIP headers, rocPRIM and
#                          libamdhip64 (default $ENV{ROCM_PATH}, /opt/rocm, /usr)

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "fp8scale: the HIP build needs a HIP clang as the C++ compiler "
                      "(amdclang++ from ROCm, or clang++-22); this build's is ${CMAKE_CXX_COMPILER_ID}")
endif()
set(FP8SCALE_HIP_ARCHS "gfx942;gfx950" CACHE STRING "AMD targets of the HIP build")
option(FP8SCALE_HIP_NOGPULIB "No ROCm device libraries (Debian's HIP packages): -nogpulib + hip_compat.h" OFF)
if(NOT DEFINED ROCM_PATH)
  set(ROCM_PATH "$ENV{ROCM_PATH}")
endif()
set(_rocm_hints ${ROCM_PATH} /opt/rocm /usr)

find_path(FP8SCALE_HIP_INCLUDE_DIR hip/hip_runtime.h HINTS ${_rocm_hints} PATH_SUFFIXES include REQUIRED)
find_path(FP8SCALE_ROCPRIM_INCLUDE_DIR rocprim/rocprim.hpp HINTS ${_rocm_hints} PATH_SUFFIXES include REQUIRED)
find_library(FP8SCALE_AMDHIP64 NAMES amdhip64 HINTS ${_rocm_hints} PATH_SUFFIXES lib lib64 REQUIRED)
message(STATUS "fp8scale: HIP build for ${FP8SCALE_HIP_ARCHS} with ${CMAKE_CXX_COMPILER} and ${FP8SCALE_AMDHIP64}")

set(_hip_flags -x hip)
foreach(arch IN LISTS FP8SCALE_HIP_ARCHS)
  list(APPEND _hip_flags --offload-arch=${arch})
endforeach()
if(FP8SCALE_HIP_NOGPULIB)
  list(APPEND _hip_flags -nogpulib -include ${PROJECT_SOURCE_DIR}/tests/isa/hip_compat.h)
endif()
set(FP8SCALE_HIP_FLAGS ${_hip_flags})
# /usr/include is searched anyway; naming it again would reorder libstdc++'s headers.
set(FP8SCALE_HIP_SYSTEM_INCLUDES ${FP8SCALE_HIP_INCLUDE_DIR} ${FP8SCALE_ROCPRIM_INCLUDE_DIR})
list(REMOVE_DUPLICATES FP8SCALE_HIP_SYSTEM_INCLUDES)
list(REMOVE_ITEM FP8SCALE_HIP_SYSTEM_INCLUDES /usr/include)

# A HIP executable from .cu / .cpp sources (compiled as C++ with -x hip).
function(fp8scale_hip_executable name)
  set(sources ${ARGN})
  set_source_files_properties(${sources} PROPERTIES LANGUAGE CXX)
  add_executable(${name} ${sources})
  target_compile_options(${name} PRIVATE ${FP8SCALE_HIP_FLAGS} -Wall -Wextra -Werror)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_include_directories(${name} SYSTEM PRIVATE ${FP8SCALE_HIP_SYSTEM_INCLUDES})
  target_compile_definitions(${name} PRIVATE FP8SCALE_TEST_DATA_DIR="${FP8SCALE_TEST_DATA_DIR}")
  if(FP8SCALE_HIP_NOGPULIB)
    # The stand-ins of hip_compat.h are for linking, not for a GPU: these
    # programs never use one (they take their no-GPU paths).
    target_compile_definitions(${name} PRIVATE FP8SCALE_HIP_NO_DEVICE_LIBS=1)
  endif()
  # fp8scale_kernels (cmake/fp8scale_kernels.cmake): the launchers compiled once.
  target_link_libraries(${name} PRIVATE fp8scale::fp8scale fp8scale_kernels ${FP8SCALE_AMDHIP64})
endfunction()

