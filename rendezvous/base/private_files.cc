#include "rendezvous/base/private_files.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

namespace drun {

int MakePrivateDirs(const std::string& path) {
  if (path.empty()) return ENOENT;
  // Each prefix ending before a '/', then the whole path.
  for (size_t pos = path.find('/', 1);; pos = path.find('/', pos + 1)) {
    const std::string prefix = pos == std::string::npos ? path : path.substr(0, pos);
    if (!prefix.empty() && mkdir(prefix.c_str(), kPrivateDirMode) != 0 && errno != EEXIST) {
      return errno;
    }
    if (pos == std::string::npos) break;
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

}  // namespace drun
