# Host parsing: Slurm hostlists, host files and -H lists (launcher/hosts/hostlist.h, hostfile.h).
# Included from launcher/CMakeLists.txt (build outputs stay in the launcher/ build dir);
# sources are named from CMAKE_CURRENT_LIST_DIR, this file's folder.
set(DRUN_HOSTS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/hostlist.cc
  ${CMAKE_CURRENT_LIST_DIR}/hostfile.cc)
set(DRUN_HOSTS_DEPS drun_base absl::status absl::statusor absl::strings absl::str_format)

add_library(drun_hosts STATIC ${DRUN_HOSTS_SOURCES})
target_include_directories(drun_hosts PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(drun_hosts PUBLIC ${DRUN_HOSTS_DEPS})

if(DRUN_BUILD_TESTS)
  include(GoogleTest)
  foreach(name hostlist_test hostfile_test)
    add_executable(${name} ${PROJECT_SOURCE_DIR}/tests/unit/${name}.cc)
    target_link_libraries(${name} PRIVATE drun_hosts GTest::gmock GTest::gtest_main)
    # The prefix keeps `ctest -R host` selecting these (gtest names are CamelCase).
    gtest_discover_tests(${name} TEST_PREFIX "${name}." DISCOVERY_TIMEOUT 30)
  endforeach()
endif()

if(DRUN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(WARNING "DRUN_FUZZ needs clang (libFuzzer); host parser fuzz targets skipped. "
                    "Configure with -DCMAKE_CXX_COMPILER=clang++ in a separate build dir.")
  else()
    set(DRUN_HOSTS_FUZZ_FLAGS -fsanitize=fuzzer,address,undefined
        -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g)
    # The library again, instrumented for coverage and sanitizers, so the fuzzers see inside
    # it; drun_hosts itself stays uninstrumented for everyone else linking it.
    add_library(drun_hosts_fuzzlib STATIC ${DRUN_HOSTS_SOURCES})
    target_include_directories(drun_hosts_fuzzlib PUBLIC ${PROJECT_SOURCE_DIR})
    target_compile_options(drun_hosts_fuzzlib PRIVATE
        -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
        -fno-omit-frame-pointer -g)
    target_link_libraries(drun_hosts_fuzzlib PUBLIC ${DRUN_HOSTS_DEPS})
    foreach(name hostlist_fuzz hostfile_fuzz)
      add_executable(${name} ${PROJECT_SOURCE_DIR}/tests/fuzz/${name}.cc)
      target_compile_options(${name} PRIVATE ${DRUN_HOSTS_FUZZ_FLAGS})
      target_link_options(${name} PRIVATE ${DRUN_HOSTS_FUZZ_FLAGS})
      target_link_libraries(${name} PRIVATE drun_hosts_fuzzlib)
      string(REPLACE "_fuzz" "" stem ${name})
      # Smoke run: ~5 s from the checked-in seeds. New inputs go to a build-dir corpus (the
      # first directory), never into the source tree.
      set(work_corpus ${CMAKE_BINARY_DIR}/fuzz/${stem}_corpus)
      file(MAKE_DIRECTORY ${work_corpus})
      add_test(NAME ${name}_smoke
               COMMAND ${name} -max_total_time=5 -timeout=10 -rss_limit_mb=2048
                       -dict=${PROJECT_SOURCE_DIR}/tests/fuzz/${stem}.dict
                       ${work_corpus} ${PROJECT_SOURCE_DIR}/tests/fuzz/${stem}_corpus)
      set_tests_properties(${name}_smoke PROPERTIES TIMEOUT 60 LABELS fuzz)
    endforeach()
  endif()
endif()
