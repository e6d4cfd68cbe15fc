# Installs fp8scale into a scratch prefix, then configures, builds and runs an
# external project that finds it with find_package(fp8scale CONFIG REQUIRED),
# and examples/ on its own against the same prefix.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()

# The headers' install needs CMake and a C++ compiler and nothing else: it is
# configured where neither nvcc nor torch is on the PATH (the compiler's and
# CMake's directories and the system's alone), and must not have looked for a
# CUDA or HIP compiler or a Python interpreter at all.
get_filename_component(cxx_dir ${CXX} DIRECTORY)
get_filename_component(cmake_dir ${CMAKE_COMMAND} DIRECTORY)
run(${CMAKE_COMMAND} -E env --unset=CUDACXX --unset=HIPCXX --unset=CUDA_PATH --unset=PYTHONPATH
    PATH=${cxx_dir}:${cmake_dir}:/usr/bin:/bin
    ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/lib-build -DFP8SCALE_BUILD_TESTS=OFF
    -DCMAKE_INSTALL_PREFIX=${WORK_DIR}/prefix -DCMAKE_CXX_COMPILER=${CXX})
file(STRINGS ${WORK_DIR}/lib-build/CMakeCache.txt probed REGEX "^(CMAKE_CUDA_COMPILER|CMAKE_HIP_COMPILER|Python3_EXECUTABLE)[:=]")
if(probed)
  message(FATAL_ERROR "the headers-only configure probed for a device compiler or Python: ${probed}")
endif()
run(${CMAKE_COMMAND} --install ${WORK_DIR}/lib-build)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/consumer-build
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_CXX_COMPILER=${CXX})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer-build)
run(${WORK_DIR}/consumer-build/consumer)
# The examples, as a user builds them on their own against the installed
# package (producer_site_device too where CMake finds nvcc).
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples -B ${WORK_DIR}/examples-build
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_CXX_COMPILER=${CXX})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/examples-build)
run(${WORK_DIR}/examples-build/producer_site)
message(STATUS "installed package found and used, examples built against it")
