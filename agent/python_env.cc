#include "agent/python_env.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "rendezvous/base/read_file.h"

namespace drun {
namespace {

std::string Dirname(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string Basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : path;
}

// pyvenv.cfg: "key = value" lines (venv, virtualenv and uv write it alike).
bool ReadVenvConfig(const std::string& prefix, v1::PythonEnv* env) {
  absl::StatusOr<std::string> text = ReadSmallFile(prefix + "/pyvenv.cfg", 1 << 16, "pyvenv.cfg");
  if (!text.ok()) return false;
  std::string home, executable;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    const std::string value(absl::StripAsciiWhitespace(kv.second));
    if (key == "include-system-site-packages") {
      env->set_system_site_packages(absl::AsciiStrToLower(value) == "true");
    } else if (key == "home") {
      home = value;
    } else if (key == "executable") {
      executable = value;  // Python 3.11+ writes the base interpreter itself
    }
  }
  env->set_kind(v1::PythonEnv::VENV);
  env->set_prefix(prefix);
  env->set_base_interpreter(!executable.empty() ? executable : home.empty() ? "" : home + "/python3");
  return true;
}

// ROOT/shims/python3, or ROOT/versions/V/bin/python3: ROOT has shims/ and versions/.
bool FindPyenv(const std::string& interpreter, v1::PythonEnv* env) {
  for (const std::string& path : {interpreter, RealPath(interpreter)}) {
    const std::string dir = Dirname(path);
    std::string root;
    if (Basename(dir) == "shims") {
      root = Dirname(dir);
    } else if (Basename(dir) == "bin" && Basename(Dirname(Dirname(dir))) == "versions") {
      root = Dirname(Dirname(Dirname(dir)));  // ROOT/versions/V/bin
    }
    if (!root.empty() && IsDir(root + "/shims") && IsDir(root + "/versions")) {
      env->set_kind(v1::PythonEnv::PYENV);
      env->set_prefix(root);
      return true;
    }
  }
  return false;
}

}  // namespace

v1::PythonEnv InspectPythonEnv(const std::string& interpreter) {
  v1::PythonEnv env;
  if (interpreter.find('/') == std::string::npos) return env;  // not found on PATH
  const std::string prefix = Dirname(Dirname(interpreter));
  if (ReadVenvConfig(prefix, &env)) return env;
  if (IsDir(prefix + "/conda-meta")) {
    env.set_kind(v1::PythonEnv::CONDA);
    env.set_prefix(prefix);
    return env;
  }
  if (FindPyenv(interpreter, &env)) return env;
  const std::string dir = Dirname(RealPath(interpreter));
  if (dir == "/usr/bin" || dir == "/bin") env.set_kind(v1::PythonEnv::SYSTEM);
  return env;
}

}  // namespace drun
