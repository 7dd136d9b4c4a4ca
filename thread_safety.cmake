# DRUN_THREAD_SAFETY_CHECK: clang's thread-safety analysis over every source
# of drun's libraries that touches a lock, as errors. Target
# `thread_safety_check` compiles those sources with -fsyntax-only (nothing is
# generated or linked, so it is cheap: the build tree it needs is only
# configured, plus the generated protobuf headers). tests/run.sh runs it in a
# build directory of its own:
#   cmake -S . -B build-tsa -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
#         -DDRUN_BUILD_TESTS=OFF -DDRUN_THREAD_SAFETY_CHECK=ON
#   cmake --build build-tsa --target thread_safety_check
# The annotations are Abseil's (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED)
# on drun's Mutex (rendezvous/base/mutex.h); gcc ignores them.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "DRUN_THREAD_SAFETY_CHECK needs clang: configure with -DCMAKE_CXX_COMPILER=clang++")
endif()

# The libraries whose sources are checked (every drun library that may hold a lock).
set(_drun_tsa_libs drun_base drun_tls drun_c10d_store drun_rendezvous drun_rendezvous_server
    drun_agent drun_stacks drun_jobhost drun_node drun_ssh drun_slurm)

# Headers that declare or take a lock: those naming mutex.h, a guarded member,
# or (transitively) such a header.
file(GLOB_RECURSE _drun_headers RELATIVE ${PROJECT_SOURCE_DIR}
     ${PROJECT_SOURCE_DIR}/agent/*.h ${PROJECT_SOURCE_DIR}/rendezvous/*.h ${PROJECT_SOURCE_DIR}/launcher/*.h)
set(_drun_lock_patterns "base/mutex.h" "GUARDED_BY" "MutexLock")
set(_drun_lock_headers "")
set(_grew TRUE)
while(_grew)
  set(_grew FALSE)
  foreach(h IN LISTS _drun_headers)
    if(h IN_LIST _drun_lock_headers)
      continue()
    endif()
    file(READ ${PROJECT_SOURCE_DIR}/${h} _text)
    foreach(p IN LISTS _drun_lock_patterns _drun_lock_headers)
      string(FIND "${_text}" "${p}" _at)
      if(_at GREATER -1)
        list(APPEND _drun_lock_headers ${h})
        set(_grew TRUE)
        break()
      endif()
    endforeach()
  endforeach()
endwhile()

# Every lock of these libraries is a drun::Mutex: a bare std::mutex would be
# invisible to the analysis, so one is refused here.
set(_bare "")
foreach(lib IN LISTS _drun_tsa_libs)
  get_target_property(_srcs ${lib} SOURCES)
  get_target_property(_dir ${lib} SOURCE_DIR)
  foreach(src IN LISTS _srcs)
    if(NOT IS_ABSOLUTE ${src})
      set(src ${_dir}/${src})
    endif()
    if(EXISTS ${src})
      list(APPEND _drun_all_files ${src})
    endif()
  endforeach()
endforeach()
foreach(h IN LISTS _drun_headers)
  list(APPEND _drun_all_files ${PROJECT_SOURCE_DIR}/${h})
endforeach()
foreach(f IN LISTS _drun_all_files)
  if(f MATCHES "rendezvous/base/mutex\\.h$")
    continue()
  endif()
  file(STRINGS ${f} _hits REGEX "std::(mutex|lock_guard|unique_lock|condition_variable)")
  if(_hits)
    list(APPEND _bare ${f})
  endif()
endforeach()
if(_bare)
  message(FATAL_ERROR "std::mutex (or its locks) in ${_bare}: use drun::Mutex, MutexLock and CondVar "
                      "(rendezvous/base/mutex.h), which the thread-safety analysis checks")
endif()

add_custom_target(thread_safety_check)
set(_drun_tsa_count 0)
foreach(lib IN LISTS _drun_tsa_libs)
  get_target_property(_srcs ${lib} SOURCES)
  get_target_property(_dir ${lib} SOURCE_DIR)
  set(_checked "")
  foreach(src IN LISTS _srcs)
    if(NOT src MATCHES "\\.cc$")
      continue()
    endif()
    if(NOT IS_ABSOLUTE ${src})
      set(src ${_dir}/${src})
    endif()
    file(READ ${src} _text)
    foreach(p IN LISTS _drun_lock_patterns _drun_lock_headers)
      string(FIND "${_text}" "${p}" _at)
      if(_at GREATER -1)
        list(APPEND _checked ${src})
        break()
      endif()
    endforeach()
  endforeach()
  if(NOT _checked)
    continue()
  endif()
  list(LENGTH _checked _n)
  math(EXPR _drun_tsa_count "${_drun_tsa_count} + ${_n}")
  # Compiled like the library itself (its include directories and
  # definitions, with the usage requirements of what it links), syntax only;
  # not linked to it, so nothing of the library is built: only the protobuf
  # headers are generated first.
  add_library(${lib}_tsa OBJECT ${_checked})
  target_include_directories(${lib}_tsa PRIVATE $<TARGET_PROPERTY:${lib},INCLUDE_DIRECTORIES>)
  target_compile_definitions(${lib}_tsa PRIVATE $<TARGET_PROPERTY:${lib},COMPILE_DEFINITIONS>)
  target_compile_options(${lib}_tsa PRIVATE $<TARGET_PROPERTY:${lib},COMPILE_OPTIONS>
                         -fsyntax-only -Wthread-safety -Werror)
  add_dependencies(${lib}_tsa drun_proto_headers)
  set_target_properties(${lib}_tsa PROPERTIES EXCLUDE_FROM_ALL TRUE)
  add_dependencies(thread_safety_check ${lib}_tsa)
endforeach()
message(STATUS "thread_safety_check: ${_drun_tsa_count} sources")
