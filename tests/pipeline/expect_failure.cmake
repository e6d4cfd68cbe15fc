# Runs EXE with the one argument ARG and passes when it exits with status 1 and
# MESSAGE in its stderr: a broken input must give a clear error and a failing
# exit status, never a crash (a signal) or a silent success.
execute_process(COMMAND ${EXE} ${ARG} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc STREQUAL "1")
  message(FATAL_ERROR "exit status '${rc}', expected 1 with an error containing '${MESSAGE}'\n"
                      "stdout:\n${out}\nstderr:\n${err}")
endif()
string(FIND "${err}" "${MESSAGE}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "exit status 1, but stderr lacks '${MESSAGE}':\n${err}")
endif()
message(STATUS "exit status 1: ${err}")
