# The ssh launcher (launcher/ssh/ssh_launcher.h): libssh sessions, --rsh children, the job plan.
# Included from launcher/CMakeLists.txt (build outputs stay in the launcher/ build dir);
# sources are named from CMAKE_CURRENT_LIST_DIR, this file's folder.
# The remote hosts' console (ssh_console.h), shared with --launcher slurm (drun_slurm).
add_library(drun_host_console STATIC ${CMAKE_CURRENT_LIST_DIR}/ssh_console.cc)
target_include_directories(drun_host_console PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(drun_host_console PUBLIC drun_agent drun_base Threads::Threads absl::strings)

add_library(drun_ssh STATIC
  ${CMAKE_CURRENT_LIST_DIR}/ssh_plan.cc
  ${CMAKE_CURRENT_LIST_DIR}/ssh_session.cc
  ${CMAKE_CURRENT_LIST_DIR}/ssh_rsh.cc
  ${CMAKE_CURRENT_LIST_DIR}/ssh_logs.cc
  ${CMAKE_CURRENT_LIST_DIR}/ssh_launcher.cc)
target_include_directories(drun_ssh PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(drun_ssh PUBLIC drun_base drun_cli drun_jobhost drun_hosts drun_host_console ssh Threads::Threads
                      absl::status absl::statusor absl::strings)

if(DRUN_BUILD_TESTS)
  include(GoogleTest)
  add_executable(ssh_plan_test ${PROJECT_SOURCE_DIR}/tests/ssh/ssh_plan_test.cc)
  target_link_libraries(ssh_plan_test PRIVATE drun_ssh GTest::gmock GTest::gtest_main)
  gtest_discover_tests(ssh_plan_test TEST_PREFIX "ssh_plan_test." DISCOVERY_TIMEOUT 30
                       PROPERTIES LABELS "unit;ssh")
  add_executable(ssh_console_test ${PROJECT_SOURCE_DIR}/tests/ssh/ssh_console_test.cc)
  target_link_libraries(ssh_console_test PRIVATE drun_ssh GTest::gtest_main)
  gtest_discover_tests(ssh_console_test TEST_PREFIX "ssh_console_test." DISCOVERY_TIMEOUT 30
                       PROPERTIES LABELS "unit;ssh")
  add_executable(ssh_logs_test ${PROJECT_SOURCE_DIR}/tests/ssh/ssh_logs_test.cc)
  target_link_libraries(ssh_logs_test PRIVATE drun_ssh GTest::gtest_main)
  gtest_discover_tests(ssh_logs_test TEST_PREFIX "ssh_logs_test." DISCOVERY_TIMEOUT 30
                       PROPERTIES LABELS "unit;ssh")
  add_executable(lifeline_test ${PROJECT_SOURCE_DIR}/tests/ssh/lifeline_test.cc)
  target_link_libraries(lifeline_test PRIVATE drun_ssh GTest::gtest_main)
  gtest_discover_tests(lifeline_test TEST_PREFIX "lifeline_test." DISCOVERY_TIMEOUT 30
                       PROPERTIES LABELS "unit;ssh")
endif()
