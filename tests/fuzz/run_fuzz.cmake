# One fuzz target under ctest (tests/fuzz/CMakeLists.txt).
#   -DMODE=replay  run every seed and regression input once
#   -DMODE=fuzz    run libFuzzer for SECONDS from a fresh copy of the seeds
#                  in WORK/corpus (the source tree is never written), then
#                  print executions, coverage and corpus size
# -DEXE= -DNAME= -DSEEDS= -DREGRESSIONS= -DWORK= [-DSECONDS=] [-DDICT=]
# A crash, sanitizer report, leak or timeout makes libFuzzer exit non-zero
# and leaves the input in WORK/crash-* (or leak-*, timeout-*): the test
# fails naming it. Add that file to regressions/NAME once the bug is fixed.
# WORK is removed first: the replay and the fuzz test use one folder each.
cmake_minimum_required(VERSION 3.25)

file(GLOB seedFiles LIST_DIRECTORIES false ${SEEDS}/*)
file(GLOB regressionFiles LIST_DIRECTORIES false ${REGRESSIONS}/*)
list(FILTER regressionFiles EXCLUDE REGEX "/README")
if(NOT seedFiles)
  message(FATAL_ERROR "${NAME}: no seed corpus in ${SEEDS}")
endif()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/corpus)

if(MODE STREQUAL "replay")
  list(LENGTH seedFiles nSeeds)
  list(LENGTH regressionFiles nRegressions)
  execute_process(COMMAND ${EXE} -timeout=30 -rss_limit_mb=2048 ${seedFiles} ${regressionFiles}
                  WORKING_DIRECTORY ${WORK} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NAME}: an input failed (exit ${rc}):\n${out}")
  endif()
  message("${NAME}: ${nSeeds} seeds and ${nRegressions} regression inputs replayed, none failed")
  return()
endif()

file(COPY ${seedFiles} DESTINATION ${WORK}/corpus)
set(args -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
         -artifact_prefix=${WORK}/)
if(DICT)
  list(APPEND args -dict=${DICT})
endif()
execute_process(COMMAND ${EXE} ${args} ${WORK}/corpus
                WORKING_DIRECTORY ${WORK} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
file(WRITE ${WORK}/fuzz.log "${out}")
file(GLOB artifacts ${WORK}/crash-* ${WORK}/leak-* ${WORK}/timeout-* ${WORK}/oom-*)
if(NOT rc EQUAL 0 OR artifacts)
  string(LENGTH "${out}" n)
  math(EXPR from "${n} - 6000")
  if(from LESS 0)
    set(from 0)
  endif()
  string(SUBSTRING "${out}" ${from} -1 tail)
  message(FATAL_ERROR "${NAME}: libFuzzer exit ${rc}; input(s): ${artifacts}\n...${tail}")
endif()
string(REGEX MATCH "stat::number_of_executed_units: ([0-9]+)" _ "${out}")
set(execs ${CMAKE_MATCH_1})
string(REGEX MATCHALL "cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*" lines "${out}")
list(POP_BACK lines last)
string(REGEX MATCH "cov: ([0-9]+) ft: ([0-9]+) corp: ([0-9]+)/([0-9]+[a-zA-Z]*)" _ "${last}")
list(LENGTH seedFiles nSeeds)
message("${NAME}: ${execs} executions in ${SECONDS} s, no crash; coverage ${CMAKE_MATCH_1} edges, "
        "${CMAKE_MATCH_2} features; corpus ${nSeeds} seeds -> ${CMAKE_MATCH_3} inputs (${CMAKE_MATCH_4})")
