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
