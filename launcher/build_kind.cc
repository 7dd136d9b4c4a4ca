#include "launcher/build_kind.h"

#include <unistd.h>

#include <fstream>

namespace drun {

std::string BuildKind() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    const std::string exe(self, n);
    const std::string dir = exe.substr(0, exe.rfind('/'));
    for (const std::string& file : {dir + "/drun-build", dir + "/../lib/drun/drun-build"}) {
      std::ifstream in(file);
      std::string line;
      if (std::getline(in, line) && !line.empty()) return line;
    }
  }
  return "source build";
}

}  // namespace drun
