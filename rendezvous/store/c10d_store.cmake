# c10d store: a PyTorch TCPStore-compatible server (docs/c10d_store.md).
# Included from rendezvous/CMakeLists.txt; paths are spelled from PROJECT_SOURCE_DIR because
# the tests, tools and benchmarks it builds live outside rendezvous/.

add_library(drun_c10d_store STATIC
  ${PROJECT_SOURCE_DIR}/rendezvous/store/c10d_store_parser.cc
  ${PROJECT_SOURCE_DIR}/rendezvous/store/c10d_store_state.cc
  ${PROJECT_SOURCE_DIR}/rendezvous/store/c10d_store.cc)
target_include_directories(drun_c10d_store PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(drun_c10d_store
  PUBLIC drun_base absl::status absl::statusor absl::strings absl::flat_hash_map
  PRIVATE Threads::Threads)

if(DRUN_BUILD_TESTS)
  include(GoogleTest)

  foreach(_drun_store_test c10d_store_parser_test c10d_store_state_test)
    add_executable(${_drun_store_test} ${PROJECT_SOURCE_DIR}/tests/unit/${_drun_store_test}.cc)
    target_link_libraries(${_drun_store_test} PRIVATE drun_c10d_store GTest::gtest_main)
    gtest_discover_tests(${_drun_store_test} TEST_PREFIX "c10d_store." DISCOVERY_TIMEOUT 30)
  endforeach()

  # Socket-level tests: raw protocol bytes against a live C10dStoreServer.
  add_executable(c10d_store_socket_test ${PROJECT_SOURCE_DIR}/tests/store/c10d_store_socket_test.cc)
  target_link_libraries(c10d_store_socket_test PRIVATE drun_c10d_store GTest::gtest_main)
  gtest_discover_tests(c10d_store_socket_test TEST_PREFIX "c10d_store." DISCOVERY_TIMEOUT 30
                       PROPERTIES TIMEOUT 120)

  # Test tool: serves a store, prints its port, runs until stdin closes or SIGTERM.
  add_executable(drun_store_server ${PROJECT_SOURCE_DIR}/tests/store/drun_store_server.cc)
  target_link_libraries(drun_store_server PRIVATE drun_c10d_store)

  # Load generator for bench/store_bench.py (speaks the 1.13 protocol, like torch's server).
  add_executable(drun_store_bench_load ${PROJECT_SOURCE_DIR}/bench/store_bench_load.cc)
  target_link_libraries(drun_store_bench_load PRIVATE absl::strings)

  # Real torch 1.13 clients. Debian's interpreter, which has python3-torch; a `python3`
  # earlier on PATH (pyenv) may not.
  set(DRUN_TORCH_PYTHON /usr/bin/python3 CACHE FILEPATH "Python interpreter with torch")
  if(EXISTS ${DRUN_TORCH_PYTHON})
    add_test(NAME c10d_store_torch_clients
      COMMAND ${DRUN_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/tests/store/c10d_store_torch_test.py
              --server $<TARGET_FILE:drun_store_server>)
    set_tests_properties(c10d_store_torch_clients PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
  endif()

  # LibTorch C++ client (check, watchKey). find_package(Torch) runs in a function so its
  # variables stay out of the rendezvous/ scope.
  include(${PROJECT_SOURCE_DIR}/examples/libtorch/torch_cxx_standard.cmake)
  function(drun_add_c10d_store_libtorch_test)
    find_package(Torch QUIET)
    if(NOT Torch_FOUND)
      message(STATUS "c10d store: LibTorch not found, skipping c10d_store_libtorch_test")
      return()
    endif()
    add_executable(c10d_store_libtorch_test
      ${PROJECT_SOURCE_DIR}/tests/store/c10d_store_libtorch_test.cc)
    target_link_libraries(c10d_store_libtorch_test PRIVATE drun_c10d_store GTest::gtest_main
                          torch_cpu c10)
    target_include_directories(c10d_store_libtorch_test PRIVATE ${TORCH_INCLUDE_DIRS})
    target_compile_options(c10d_store_libtorch_test PRIVATE -D_GLIBCXX_USE_CXX11_ABI=1
                           -Wno-deprecated-declarations)
    drun_torch_cxx_standard(c10d_store_libtorch_test)
    gtest_discover_tests(c10d_store_libtorch_test TEST_PREFIX "c10d_store." DISCOVERY_TIMEOUT 60
                         PROPERTIES TIMEOUT 120)
  endfunction()
  drun_add_c10d_store_libtorch_test()
endif()

if(DRUN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "DRUN_FUZZ needs clang (-DCMAKE_CXX_COMPILER=clang++)")
  endif()
  # The library is rebuilt with the sanitizers so the fuzzer sees into the parser and state.
  add_library(drun_c10d_store_fuzzlib STATIC
    ${PROJECT_SOURCE_DIR}/rendezvous/store/c10d_store_parser.cc
    ${PROJECT_SOURCE_DIR}/rendezvous/store/c10d_store_state.cc)
  target_include_directories(drun_c10d_store_fuzzlib PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(drun_c10d_store_fuzzlib
    PUBLIC absl::status absl::strings absl::flat_hash_map)
  target_compile_options(drun_c10d_store_fuzzlib PRIVATE
    -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined)

  add_executable(c10d_store_parser_fuzz ${PROJECT_SOURCE_DIR}/tests/fuzz/c10d_store_parser_fuzz.cc)
  target_link_libraries(c10d_store_parser_fuzz PRIVATE drun_c10d_store_fuzzlib)
  target_compile_options(c10d_store_parser_fuzz PRIVATE
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
  target_link_options(c10d_store_parser_fuzz PRIVATE -fsanitize=fuzzer,address,undefined)

  if(DRUN_BUILD_TESTS)
    # A 10-second smoke run only; the long campaign is documented in docs/c10d_store.md.
    add_test(NAME c10d_store_parser_fuzz_smoke
      COMMAND c10d_store_parser_fuzz -max_total_time=10 -max_len=4096 -rss_limit_mb=2048)
    set_tests_properties(c10d_store_parser_fuzz_smoke PROPERTIES TIMEOUT 60)
  endif()
endif()
