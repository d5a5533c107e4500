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

# wh_skipped_test(NAME REASON [LABELS...]): a test whose dependency was
# missing at configure time stays in the test list and is reported skipped
# (exit 77) with REASON printed, instead of vanishing.
function(wh_skipped_test name reason)
  add_test(NAME ${name} COMMAND sh -c "echo \"SKIP: $1\"; exit 77" sh "${reason}")
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS "${ARGN}")
endfunction()
