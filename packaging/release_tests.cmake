# ctest entries of the release (packaging/make_release.sh), included from the top-level
# CMakeLists.txt with the tests.
#   release.glibc_floor           this build's drun and drun-net, by check_glibc_floor.py: in a
#                                 -DDRUN_PORTABLE=ON build nothing newer than GLIBC_2.28 (exit 0);
#                                 in the ordinary build the checker must name the 2.34 imports
#                                 it has (exit 1), so it is known to catch them (label unit)
#   release.make_release          make_release.sh into build/release-test (a second build, in
#                                 make_release.sh's build-release/, RUN_SERIAL, label release): both outputs
#                                 pass the check, the tarball holds one drun-<version>/ folder
#                                 with bin/drun, lib/drun/drun-net and the man page, and the
#                                 wheel pip-installed into a venv runs its workers with the
#                                 venv's python3 (PYTHON_EXEC unset, venv not activated)
set(_floor ${PROJECT_SOURCE_DIR}/packaging/check_glibc_floor.py)
if(DRUN_PORTABLE)
  add_test(NAME release.glibc_floor
           COMMAND python3 ${_floor} $<TARGET_FILE:drun> $<TARGET_FILE:drun-net>)
else()
  add_test(NAME release.glibc_floor
    COMMAND sh -c [=[
      out=$(python3 "$1" "$2"); rc=$?
      echo "$out" | tail -n 3
      [ "$rc" -eq 1 ] && echo "$out" | grep -q "newer than GLIBC_2.28"
    ]=] glibc_floor ${_floor} $<TARGET_FILE:drun-net>)
endif()
set_tests_properties(release.glibc_floor PROPERTIES TIMEOUT 60 LABELS unit)

add_test(NAME release.make_release
  COMMAND sh -c [=[
    set -eu
    repo=$1 build=$2 version=$3
    out="$build/release-test"
    rm -rf "$out" && mkdir -p "$out"
    "$repo/packaging/make_release.sh" "$out/dist" \
      > "$out/make_release.log" 2>&1 || { tail -n 30 "$out/make_release.log"; exit 1; }
    tarball="$out/dist/drun-$version-linux-x86_64.tar.gz"
    wheel="$out/dist/drun-$version-py3-none-manylinux_2_28_x86_64.whl"
    python3 "$repo/packaging/check_glibc_floor.py" "$tarball" "$wheel"
    tar -tzf "$tarball" > "$out/contents.txt"
    for f in bin/drun lib/drun/drun-net lib/drun/drun-build share/man/man1/drun.1.gz \
             share/doc/drun/README.md; do
      grep -qx "drun-$version/$f" "$out/contents.txt" || { echo "missing from $tarball: $f"; exit 1; }
    done
    [ -z "$(grep -v "^drun-$version/" "$out/contents.txt")" ] || { echo "outside drun-$version/"; exit 1; }
    /usr/bin/python3 -m venv "$out/venv"
    "$out/venv/bin/pip" install -q --no-index "$wheel"
    "$out/venv/bin/drun" --version | grep -q "^drun $version (wheel; "
    printf 'import os, sys\nprint("python", sys.executable, flush=True)\n' > "$out/which.py"
    said=$(cd "$out" && env -u PYTHON_EXEC PATH=/usr/bin:/bin "$out/venv/bin/drun" \
             --standalone --nproc-per-node 2 which.py)
    echo "$said"
    [ "$(echo "$said" | grep -c "python $out/venv/bin/python3\$")" -eq 2 ]
  ]=] make_release ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR} ${PROJECT_VERSION})
set_tests_properties(release.make_release PROPERTIES TIMEOUT 3000 RUN_SERIAL TRUE LABELS release)
