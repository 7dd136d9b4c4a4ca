# The release build (-DDRUN_PORTABLE=ON; packaging/make_release.sh): drun and drun-net that
# need nothing of a machine but glibc 2.28 or later (docs/install.md "How the release is
# built"). Included from the top-level CMakeLists.txt in two steps:
#   drun_portable_libraries()    after find_package: libssh and yaml-cpp from their archives
#                                (OpenSSL's through OPENSSL_USE_STATIC_LIBS, zlib's through
#                                DRUN_ZLIB_LINK; gRPC, Protobuf and Abseil: static_deps.cmake)
#   drun_portable_executables()  after the executables: libstdc++ and libgcc linked in, the
#                                glibc 2.28 compatibility layer (glibc_compat.c), and the old
#                                homes of the pthread and dl functions (libpthread.so.0,
#                                libdl.so.2, librt.so.1) as DT_NEEDED, where glibc 2.28 has them.
# packaging/check_glibc_floor.py checks the result (no symbol newer than GLIBC_2.28, no
# library outside glibc); make_release.sh runs it on every ELF it packs.

# The archive next to an imported target's shared library (libssh.so.4.9.6 -> libssh.a).
function(_drun_portable_archive target)
  get_target_property(_cfgs ${target} IMPORTED_CONFIGURATIONS)
  foreach(_prop IMPORTED_LOCATION ${_cfgs})
    if(NOT _prop STREQUAL "IMPORTED_LOCATION")
      set(_prop IMPORTED_LOCATION_${_prop})
    endif()
    get_target_property(_loc ${target} ${_prop})
    if(NOT _loc)
      continue()
    endif()
    get_filename_component(_dir "${_loc}" DIRECTORY)
    get_filename_component(_name "${_loc}" NAME)
    string(REGEX REPLACE "\\.so(\\..*)?$" ".a" _archive "${_name}")
    if(NOT EXISTS "${_dir}/${_archive}")
      message(FATAL_ERROR "DRUN_PORTABLE: ${_dir}/${_archive} not found (the static archive of ${target})")
    endif()
    set_target_properties(${target} PROPERTIES ${_prop} "${_dir}/${_archive}")
    set_property(TARGET ${target} PROPERTY IMPORTED_NO_SONAME TRUE)
  endforeach()
endfunction()

macro(drun_portable_libraries)
  find_package(OpenSSL REQUIRED)
  find_library(DRUN_ZLIB_ARCHIVE NAMES libz.a REQUIRED)
  set(DRUN_ZLIB_LINK "${DRUN_ZLIB_ARCHIVE}")
  add_library(drun_gssapi_stub STATIC ${PROJECT_SOURCE_DIR}/packaging/gssapi_stub.c)
  _drun_portable_archive(ssh)
  _drun_portable_archive(yaml-cpp)
  # What libssh.a needs besides itself (the shared libssh pulls these through its DT_NEEDED).
  set_property(TARGET ssh APPEND PROPERTY INTERFACE_LINK_LIBRARIES
               OpenSSL::Crypto "${DRUN_ZLIB_ARCHIVE}" drun_gssapi_stub Threads::Threads)
  add_library(drun_glibc_compat OBJECT ${PROJECT_SOURCE_DIR}/packaging/glibc_compat.c)
  message(STATUS "drun: portable build (glibc 2.28 floor): libssh, yaml-cpp, OpenSSL, zlib, "
                 "libstdc++ and libgcc linked statically")
endmacro()

function(drun_portable_executables)
  foreach(_exe drun drun-net)
    target_sources(${_exe} PRIVATE $<TARGET_OBJECTS:drun_glibc_compat>)
    target_link_options(${_exe} PRIVATE -static-libstdc++ -static-libgcc)
    # -l:NAME: glibc 2.34+ ships libpthread, libdl and librt as stub .so.N files without the
    # .so link, so -lpthread would find the empty archive and add no DT_NEEDED entry.
    target_link_libraries(${_exe} PRIVATE -Wl,--no-as-needed -l:libpthread.so.0 -l:libdl.so.2
                          -l:librt.so.1)
  endforeach()
endfunction()
