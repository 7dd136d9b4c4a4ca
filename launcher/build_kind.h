// How this drun was built and installed, for `drun --version`: "release tarball", "wheel",
// "Debian package" or "source build". The first three write it into the one-line file
// lib/drun/drun-build beside drun-net (packaging/make_release.sh, packaging/make_wheel.py,
// packaging.cmake's CPack step); a build tree or `cmake --install` has none.
#ifndef DRUN_LAUNCHER_BUILD_KIND_H_
#define DRUN_LAUNCHER_BUILD_KIND_H_

#include <string>

namespace drun {

// The first line of drun-build next to this executable (drun-net's directory) or in
// ../lib/drun (bin/drun's), else "source build".
std::string BuildKind();

}  // namespace drun

#endif  // DRUN_LAUNCHER_BUILD_KIND_H_
