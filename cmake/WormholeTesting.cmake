# wh_session_test(TARGET SOURCE PREFIX LABEL): a gtest of a library's session
# bodies against hostile requests (tests/common/session_fixture.hpp), run on
# the sim device in-process, no guest library; its tests are PREFIX.*.
include(GoogleTest)
function(wh_session_test target source prefix label)
  add_executable(${target} ${source})
  target_link_libraries(${target} PRIVATE wh_session GTest::gtest_main)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
  gtest_discover_tests(${target} TEST_PREFIX "${prefix}." DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${label}")
endfunction()

# The stacked runs (label `stacked`, docs/hardware.md): a test again, its
# server a cuda-backend server with Wormhole's own drop-ins as the driver,
# forwarding to a sim server (WH_TEST_STACKED=1, read by tests/blas/forwarded.sh
# and tests/common/test_process.hpp).
#   wh_stacked_twin(<test> [TIMEOUT s] [ENVIRONMENT k=v...] COMMAND ...): stacked.<test>
#   wh_stacked_gtests(<target> <prefix>): the target's gtests again as stacked.<prefix>.*
function(wh_stacked_twin name)
  cmake_parse_arguments(A "" "TIMEOUT" "COMMAND;ENVIRONMENT" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 600)
  endif()
  set(env WH_TEST_STACKED=1 ${A_ENVIRONMENT})
  if(WH_SANITIZER_RUNTIME)
    list(APPEND env WH_PRELOAD=${WH_SANITIZER_RUNTIME})
  endif()
  add_test(NAME stacked.${name} COMMAND ${A_COMMAND})
  set_tests_properties(stacked.${name} PROPERTIES LABELS stacked TIMEOUT ${A_TIMEOUT} ENVIRONMENT "${env}"
                       SKIP_RETURN_CODE 77)
endfunction()
function(wh_stacked_gtests target prefix)
  gtest_discover_tests(${target} TEST_PREFIX "stacked.${prefix}." DISCOVERY_TIMEOUT 60
                       PROPERTIES LABELS stacked TIMEOUT 300 ENVIRONMENT WH_TEST_STACKED=1)
endfunction()

# wh_skipped_test(NAME REASON [LABELS...]): a test whose dependency was
# missing at configure time stays in the test list and is reported skipped
# (exit 77) with REASON printed, instead of vanishing.
function(wh_skipped_test name reason)
  add_test(NAME ${name} COMMAND sh -c "echo \"SKIP: $1\"; exit 77" sh "${reason}")
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS "${ARGN}")
endfunction()
