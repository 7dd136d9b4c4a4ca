# CPack pre-build script (packaging.cmake, CPACK_PRE_BUILD_SCRIPTS): the Debian package holds
# lib/drun/drun-build saying "Debian package" beside drun-net, for `drun --version`
# (launcher/build_kind.h). Runs on CPack's staging tree, after the install step.
file(GLOB_RECURSE _drun_nets "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/*drun-net")
if(NOT _drun_nets)
  message(FATAL_ERROR "deb_build_kind.cmake: no drun-net under ${CPACK_TEMPORARY_INSTALL_DIRECTORY}")
endif()
foreach(_net IN LISTS _drun_nets)
  get_filename_component(_dir "${_net}" DIRECTORY)
  file(WRITE "${_dir}/drun-build" "Debian package\n")
endforeach()
