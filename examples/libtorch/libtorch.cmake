# The LibTorch C++ trainer example (examples/libtorch/README.md), built in drun's tree and
# run under the built drun by the e2e.libtorch_trainer test. Included from the top-level
# CMakeLists.txt after launcher/ (the drun target). examples/libtorch/CMakeLists.txt is the
# same build as a standalone project for users to copy.
#
# Optional: without LibTorch (Debian: libtorch-dev) or gloo's headers (libgloo-dev) the
# target and its test are skipped with a message. find_package(Torch) runs in a function so
# its variables stay out of the top-level scope.

include(${CMAKE_CURRENT_LIST_DIR}/torch_cxx_standard.cmake)

function(drun_add_libtorch_trainer)
  find_package(Torch QUIET)
  if(NOT Torch_FOUND)
    message(STATUS "examples/libtorch: LibTorch not found, skipping drun_libtorch_train")
    return()
  endif()
  # ProcessGroupGloo.hpp includes gloo's headers, which libtorch-dev does not ship.
  find_path(DRUN_GLOO_INCLUDE_DIR gloo/config.h HINTS ${TORCH_INCLUDE_DIRS})
  if(NOT DRUN_GLOO_INCLUDE_DIR)
    message(STATUS "examples/libtorch: gloo headers not found (Debian: libgloo-dev), "
                   "skipping drun_libtorch_train")
    return()
  endif()

  add_executable(drun_libtorch_train ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/train.cpp)
  target_include_directories(drun_libtorch_train PRIVATE ${TORCH_INCLUDE_DIRS}
                             ${DRUN_GLOO_INCLUDE_DIR})
  target_link_libraries(drun_libtorch_train PRIVATE torch_cpu c10 Threads::Threads)
  # USE_C10D_GLOO: ProcessGroupGloo.hpp is empty without it (Debian's libtorch is built
  # with gloo). The ABI flag matches Debian's build (TORCH_CXX_FLAGS).
  target_compile_definitions(drun_libtorch_train PRIVATE USE_C10D_GLOO)
  target_compile_options(drun_libtorch_train PRIVATE -D_GLIBCXX_USE_CXX11_ABI=1
                         -Wno-deprecated-declarations -Wno-unused-parameter)
  drun_torch_cxx_standard(drun_libtorch_train)
  set_target_properties(drun_libtorch_train PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/examples/libtorch)

  if(DRUN_BUILD_TESTS AND TARGET drun)
    add_test(NAME e2e.libtorch_trainer
             COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/e2e/test_libtorch_trainer.py
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/e2e)
    set_tests_properties(e2e.libtorch_trainer PROPERTIES
      ENVIRONMENT
        "DRUN=$<TARGET_FILE:drun>;PYTHON_EXEC=/usr/bin/python3;DRUN_LIBTORCH_TRAINER=$<TARGET_FILE:drun_libtorch_train>"
      TIMEOUT 300
      LABELS e2e)
  endif()
endfunction()
drun_add_libtorch_trainer()
