# Installing drun (`cmake --install`) and its Debian package (`cpack -G DEB`).
# Included from the top-level CMakeLists.txt, after add_subdirectory(launcher): drun's own
# install rule is in launcher/CMakeLists.txt, and launcher/job/CMakeLists.txt writes the man
# page to ${PROJECT_BINARY_DIR}/man/drun.1.gz (its drun_man_page target is part of `all`).
#
#   cmake --install build --prefix /usr/local     bin/drun, share/man/man1/drun.1.gz,
#                                                 share/bash-completion/completions/drun,
#                                                 share/doc/drun/{configs,examples,...}
#   (cd build && cpack -G DEB)                    build/drun_<version>_<arch>.deb
include(GNUInstallDirs)  # CMAKE_INSTALL_MANDIR = share/man, CMAKE_INSTALL_DOCDIR = share/doc/drun

install(FILES ${PROJECT_BINARY_DIR}/man/drun.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
# bash-completion loads completions/<command> on first use (launcher/job/CMakeLists.txt writes it).
install(FILES ${PROJECT_BINARY_DIR}/completion/drun
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/configs
        FILES_MATCHING PATTERN "*.yaml")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
        USE_SOURCE_PERMISSIONS
        PATTERN "__pycache__" EXCLUDE PATTERN "*.pyc" EXCLUDE PATTERN "build*" EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
        FILES_MATCHING PATTERN "*.md")

# --- Debian package -----------------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME drun)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "drun developers")
set(CPACK_PACKAGE_CONTACT "drun developers <drun-dev@localhost>")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "drun developers <drun-dev@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "launcher for distributed PyTorch jobs (a torchrun replacement)")
# The long description; CPack puts the summary above it.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "drun starts one agent per node (locally, over ssh, or in a Slurm allocation),
runs each node's workers with the environment torchrun gives them, supervises
them, restarts the whole job on failure, and prints a root-cause summary.
It reads torchrun's options and PET_* variables, mpirun host files, and
YAML job files. Example job files and trainers are in /usr/share/doc/drun.")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # drun_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_STRIP_FILES ON)                # the build keeps its debug info; the package does not
# `drun --version` says "Debian package": lib/drun/drun-build, written into the staging tree.
set(CPACK_PRE_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/packaging/deb_build_kind.cmake)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# The workers are Python (or any program): recommend the interpreter, suggest the rest.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3, openssh-client")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-torch, dataset-fashion-mnist, slurm-client")

# The shared libraries drun links (libssh-4, libyaml-cpp0.7, OpenSSL, ...; also
# libgrpc++1.51, libprotobuf32 and Abseil with -DDRUN_STATIC_DEPS=OFF, see
# static_deps.cmake) become Depends through dpkg-shlibdeps, with the versions the build
# saw. Without dpkg-shlibdeps (dpkg-dev) or file(1), CPack cannot do that: declare
# Debian 12's names instead.
if(DRUN_STATIC_DEPS_USED)
  set(_drun_deb_libs "libssh-4 libyaml-cpp0.7")
  set(_drun_deb_depends "libc6, libstdc++6, libgcc-s1, libssh-4, libyaml-cpp0.7, libssl3, zlib1g")
else()
  set(_drun_deb_libs "libgrpc++1.51 libprotobuf32 libssh-4 libyaml-cpp0.7")
  set(_drun_deb_depends
      "libc6, libstdc++6, libgcc-s1, libgrpc++1.51, libgrpc29, libprotobuf32, libssh-4, libyaml-cpp0.7, libabsl20220623, libssl3")
endif()
find_program(DRUN_DPKG_SHLIBDEPS dpkg-shlibdeps)
find_program(DRUN_FILE_PROGRAM file)
if(DRUN_DPKG_SHLIBDEPS AND DRUN_FILE_PROGRAM)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  message(STATUS "dpkg-shlibdeps or file not found: the .deb declares Debian 12's library "
                 "package names as Depends")
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_drun_deb_depends}")
endif()

include(CPack)

# ctest: the package builds and holds what it should. cpack installs from the build tree, so
# this needs the whole build; it works in build/package-test, apart from `cpack` in build/.
if(DRUN_BUILD_TESTS)
  add_test(NAME package_deb
    COMMAND sh -c [=[
      set -eu
      out="$1/package-test"
      rm -rf "$out" && mkdir -p "$out"
      if ! "$2" -G DEB --config "$1/CPackConfig.cmake" -B "$out" >"$out/cpack.log" 2>&1; then
        cat "$out/cpack.log"; exit 1
      fi
      deb=$(ls "$out"/drun_*.deb)
      dpkg-deb -c "$deb" | awk '{print $6}' >"$out/contents.txt"
      dpkg-deb -I "$deb" >"$out/info.txt"
      status=0
      for f in ./usr/bin/drun ./usr/lib/drun/drun-net ./usr/lib/drun/drun-build \
               ./usr/share/man/man1/drun.1.gz ./usr/share/bash-completion/completions/drun \
               ./usr/share/doc/drun/configs/one_lab_pc.yaml \
               ./usr/share/doc/drun/configs/lab_pcs_ssh.yaml \
               ./usr/share/doc/drun/configs/slurm_allocation.yaml \
               ./usr/share/doc/drun/configs/elastic_2_4.yaml \
               ./usr/share/doc/drun/examples/mnist_ddp.py; do
        grep -qxF "$f" "$out/contents.txt" || { echo "missing from $deb: $f"; status=1; }
      done
      depends=$(sed -n 's/^ Depends: //p' "$out/info.txt")
      for lib in $3; do
        case ", $depends," in
          *", $lib"[\ ,]*) ;;
          *) echo "Depends lacks $lib: $depends"; status=1 ;;
        esac
      done
      [ "$status" -eq 0 ] || { cat "$out/info.txt" "$out/contents.txt"; exit 1; }
      echo "$deb"; echo "Depends: $depends"
    ]=] package_deb ${PROJECT_BINARY_DIR} ${CMAKE_CPACK_COMMAND} "${_drun_deb_libs}")
  set_tests_properties(package_deb PROPERTIES TIMEOUT 300 LABELS package)
endif()
