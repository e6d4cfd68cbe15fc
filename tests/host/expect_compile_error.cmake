# Compiles SRC (-fsyntax-only) with CXX against INCLUDE and passes when the
# compiler refuses it with an error containing the fragment of SRC's first
# line ("// expect: <fragment>"): the type rules hold at compile time, and the
# file fails for the reason it is about, not a typo.
file(STRINGS ${SRC} first LIMIT_COUNT 1)
string(REGEX REPLACE "^// expect: " "" fragment "${first}")
if(fragment STREQUAL first OR fragment STREQUAL "")
  message(FATAL_ERROR "${SRC}: the first line must be '// expect: <error fragment>'")
endif()
execute_process(COMMAND ${CXX} -std=c++17 -fsyntax-only -I${INCLUDE} ${SRC}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SRC} compiled; it must be refused with '${fragment}'")
endif()
string(FIND "${err}" "${fragment}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${SRC} was refused, but not with '${fragment}':\n${err}")
endif()
message(STATUS "refused as expected: '${fragment}'")
