# Job files (launcher/config_file.h) and the man page (launcher/man_page.h, drun.1).
# Included from launcher/CMakeLists.txt, so CMAKE_CURRENT_SOURCE_DIR is launcher/.

# KnownOptions() lives in drun_cli, which in turn calls LoadJobFile: CMake allows that
# cycle between static libraries.
add_library(drun_config STATIC ${CMAKE_CURRENT_SOURCE_DIR}/config_file.cc)
target_include_directories(drun_config PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(drun_config PUBLIC drun_cli drun_hosts yaml-cpp
                      absl::status absl::statusor absl::strings)

add_library(drun_man STATIC ${CMAKE_CURRENT_SOURCE_DIR}/man_page.cc)
target_include_directories(drun_man PUBLIC ${PROJECT_SOURCE_DIR})
target_compile_definitions(drun_man PRIVATE DRUN_VERSION="${PROJECT_VERSION}")
target_link_libraries(drun_man PUBLIC drun_cli absl::strings)

add_executable(drun_manpage ${CMAKE_CURRENT_SOURCE_DIR}/man_page_main.cc)
target_link_libraries(drun_manpage PRIVATE drun_man)

# drun.1 and drun.1.gz (Debian installs man pages compressed) at a fixed place in the
# build tree, which packaging.cmake installs from.
set(DRUN_MAN_DIR ${PROJECT_BINARY_DIR}/man)
add_custom_command(
  OUTPUT ${DRUN_MAN_DIR}/drun.1 ${DRUN_MAN_DIR}/drun.1.gz
  COMMAND ${CMAKE_COMMAND} -E make_directory ${DRUN_MAN_DIR}
  COMMAND drun_manpage ${DRUN_MAN_DIR}/drun.1
  COMMAND sh -c "gzip -9n < drun.1 > drun.1.gz.tmp && mv drun.1.gz.tmp drun.1.gz"
  WORKING_DIRECTORY ${DRUN_MAN_DIR}
  DEPENDS drun_manpage
  COMMENT "Generating drun.1"
  VERBATIM)
add_custom_target(drun_man_page ALL DEPENDS ${DRUN_MAN_DIR}/drun.1 ${DRUN_MAN_DIR}/drun.1.gz)

if(DRUN_BUILD_TESTS)
  include(GoogleTest)
  add_executable(config_file_test ${PROJECT_SOURCE_DIR}/tests/unit/config_file_test.cc)
  target_compile_definitions(config_file_test PRIVATE
                             DRUN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  target_link_libraries(config_file_test PRIVATE drun_config GTest::gmock GTest::gtest_main)
  gtest_discover_tests(config_file_test TEST_PREFIX "config_file_test." DISCOVERY_TIMEOUT 30)

  add_executable(man_page_test ${PROJECT_SOURCE_DIR}/tests/unit/man_page_test.cc)
  target_compile_definitions(man_page_test PRIVATE DRUN_MAN_PAGE="${DRUN_MAN_DIR}/drun.1")
  target_link_libraries(man_page_test PRIVATE drun_man GTest::gmock GTest::gtest_main)
  add_dependencies(man_page_test drun_man_page)
  gtest_discover_tests(man_page_test TEST_PREFIX "man_page_test." DISCOVERY_TIMEOUT 30)
endif()
