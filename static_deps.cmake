# Link gRPC, Protobuf and Abseil into drun's executables from Debian's static archives
# (libgrpc++-dev, libprotobuf-dev and libabsl-dev ship them next to the shared ones).
#
# Why: a drun agent is short-lived and there may be a thousand of them on a machine. Linked
# against the shared libraries, drun-net maps about 75 of them (Debian splits Abseil into ~60
# libraries): 385 mappings and 17.7 MiB of pages, which the dynamic loader relocates at every
# start and the kernel tears down at every exit. Linked statically: 134 mappings, 12.6 MiB,
# the whole life of an agent costs 16 ms of CPU instead of 31 ms, and a round of 1024 agents
# on 2 cores ends in about 2 s instead of 3.7 s (docs/benchmarks_rendezvous.md).
#
# gRPC is linked in its "unsecure" build (drun speaks plain TCP to its rendezvous), so no
# second OpenSSL enters the process: libssh and the Slurm token code keep using the shared
# libcrypto, and zlib stays shared for libssh too (DRUN_ZLIB_LINK; the release build,
# packaging/portable.cmake, links zlib's archive instead). Each library is linked exactly once, as
# an archive or as a shared object, never both.
#
# How: every imported Abseil, gRPC (grpc++, grpc, gpr, upb, address_sorting) and Protobuf
# target is pointed at its archive, and all of them depend on one group of archives that
# ends every link line (ld resolves the archives' cross references inside the group).
# -DDRUN_STATIC_DEPS=OFF links the shared libraries as before.
option(DRUN_STATIC_DEPS "Link gRPC, Protobuf and Abseil from their static archives" ON)

# libgrpc++.so.1.51.1 -> libgrpc++_unsecure.a, libabsl_strings.so.20220623.0.0 ->
# libabsl_strings.a (in the same directory).
function(_drun_archive_of loc out)
  get_filename_component(dir "${loc}" DIRECTORY)
  get_filename_component(name "${loc}" NAME)
  string(REGEX REPLACE "\\.(so|a)(\\..*)?$" "" base "${name}")
  if(base MATCHES "^libgrpc(\\+\\+)?$")
    set(base "${base}_unsecure")
  endif()
  set(${out} "${dir}/${base}.a" PARENT_SCOPE)
endfunction()

if(DRUN_STATIC_DEPS)
  set(_drun_targets)
  set(_drun_archives)
  set(_drun_missing)
  get_property(_drun_imported DIRECTORY ${PROJECT_SOURCE_DIR} PROPERTY IMPORTED_TARGETS)
  foreach(_t IN LISTS _drun_imported)
    if(NOT _t MATCHES "^(absl::.*|gRPC::(grpc\\+\\+|grpc|gpr|upb|address_sorting)|protobuf::libprotobuf)$")
      continue()
    endif()
    get_target_property(_type ${_t} TYPE)
    if(_type STREQUAL "INTERFACE_LIBRARY")
      continue()  # header-only
    endif()
    get_target_property(_loc ${_t} IMPORTED_LOCATION)
    if(NOT _loc)
      get_target_property(_cfgs ${_t} IMPORTED_CONFIGURATIONS)
      foreach(_c IN LISTS _cfgs)
        get_target_property(_loc ${_t} IMPORTED_LOCATION_${_c})
        if(_loc)
          break()
        endif()
      endforeach()
    endif()
    if(NOT _loc)
      continue()
    endif()
    _drun_archive_of("${_loc}" _archive)
    if(EXISTS "${_archive}")
      list(APPEND _drun_targets ${_t})
      list(APPEND _drun_archives "${_archive}")
    else()
      list(APPEND _drun_missing "${_archive}")
    endif()
  endforeach()
  # What static gRPC needs besides Abseil (the shared libgrpc pulls these itself).
  foreach(_lib cares re2)
    find_library(_drun_lib_${_lib} NAMES lib${_lib}.a)
    if(_drun_lib_${_lib})
      list(APPEND _drun_archives "${_drun_lib_${_lib}}")
    else()
      list(APPEND _drun_missing "lib${_lib}.a")
    endif()
  endforeach()

  if(_drun_missing OR NOT _drun_targets)
    message(STATUS "drun: static archives missing (${_drun_missing}); linking the shared "
                   "gRPC, Protobuf and Abseil")
  else()
    list(REMOVE_DUPLICATES _drun_archives)
    add_library(drun_static_deps INTERFACE)
    target_link_libraries(drun_static_deps INTERFACE
      "-Wl,--start-group" ${_drun_archives} "-Wl,--end-group" ${DRUN_ZLIB_LINK} Threads::Threads dl m rt)
    foreach(_t IN LISTS _drun_targets)
      set_target_properties(${_t} PROPERTIES INTERFACE_LINK_LIBRARIES drun_static_deps)
    endforeach()
    # Point each target at its archive, in every configuration it knows.
    foreach(_t IN LISTS _drun_targets)
      get_target_property(_cfgs ${_t} IMPORTED_CONFIGURATIONS)
      foreach(_prop IMPORTED_LOCATION ${_cfgs})
        if(NOT _prop STREQUAL "IMPORTED_LOCATION")
          set(_prop IMPORTED_LOCATION_${_prop})
        endif()
        get_target_property(_l ${_t} ${_prop})
        if(_l)
          _drun_archive_of("${_l}" _archive)
          set_target_properties(${_t} PROPERTIES ${_prop} "${_archive}")
        endif()
      endforeach()
    endforeach()
    set(DRUN_STATIC_DEPS_USED ON)
    message(STATUS "drun: gRPC, Protobuf and Abseil linked from static archives")
  endif()
endif()
