# Job files (launcher/config_file.h).
# Included from launcher/CMakeLists.txt, so CMAKE_CURRENT_SOURCE_DIR is launcher/.

# KnownOptions() lives in drun_cli, which in turn calls LoadJobFile: CMake allows that
# cycle between static libraries.
add_library(drun_config STATIC ${CMAKE_CURRENT_SOURCE_DIR}/config_file.cc)
target_include_directories(drun_config PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(drun_config PUBLIC drun_cli drun_hosts yaml-cpp
                      absl::status absl::statusor absl::strings)

if(DRUN_BUILD_TESTS)
  include(GoogleTest)
  add_executable(config_file_test ${PROJECT_SOURCE_DIR}/tests/unit/config_file_test.cc)
  target_compile_definitions(config_file_test PRIVATE
                             DRUN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  target_link_libraries(config_file_test PRIVATE drun_config GTest::gmock GTest::gtest_main)
  gtest_discover_tests(config_file_test TEST_PREFIX "config_file_test." DISCOVERY_TIMEOUT 30)
endif()
