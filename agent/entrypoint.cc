#include "agent/entrypoint.h"

#include "agent/python_env.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "rendezvous/base/words.h"

namespace drun {

namespace {

absl::Status Bad(std::string msg) { return absl::InvalidArgumentError(std::move(msg)); }

std::string InDir(const std::string& path, const std::string& dir) {
  if (path.empty() || path[0] == '/' || dir.empty()) return path;
  return absl::StrCat(dir, "/", path);
}

bool Executable(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::string Value(const EnvMap& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

absl::Status CheckInterpreter(const v1::JobSpec& spec, const EnvMap& env) {
  const std::string python = PythonInterpreter(spec, env);
  if (!FindProgram(python, env, spec.working_dir()).empty()) return absl::OkStatus();
  const bool chosen = !spec.python_exec().empty() || !Value(env, "PYTHON_EXEC").empty();
  return Bad(absl::StrCat("cannot run the Python interpreter '", python, "'",
                          chosen ? " (PYTHON_EXEC)" : " (not on PATH)",
                          ": set PYTHON_EXEC=/usr/bin/python3 (or another interpreter), or run a "
                          "program with --no-python"));
}

// The name of a file beside `path` that is a likely misspelling of its last
// component (ex2_reduse.py for ex2_reduce.py); "" when none is.
std::string NearbyFile(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    // A directory of thousands of files is no place to guess in.
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.' && names.size() < 4096) names.push_back(e->d_name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return NearestName(name, names, name.size() >= 6 ? 2 : 1);
}

absl::Status CheckScript(const v1::JobSpec& spec) {
  const std::string& script = spec.entrypoint();
  if (IsPythonInterpreter(script)) {
    return Bad(absl::StrCat("'", script, "' is an interpreter, and drun already runs the script with "
                            "python3 -u (or $PYTHON_EXEC): drop it and write drun [options] ",
                            spec.args_size() > 0 ? spec.args(0) : "train.py",
                            " ..., or add --no-python to run '", script, "' as the program"));
  }
  struct stat st;
  if (stat(InDir(script, spec.working_dir()).c_str(), &st) != 0) {
    const std::string near = NearbyFile(InDir(script, spec.working_dir()));
    if (!near.empty()) {
      const size_t slash = script.rfind('/');
      const std::string suggestion = slash == std::string::npos ? near : script.substr(0, slash + 1) + near;
      return Bad(absl::StrCat(script, ": no such file in ", spec.working_dir(), "; did you mean ", suggestion,
                              "?"));
    }
    return Bad(absl::StrCat(script, ": no such file in ", spec.working_dir(),
                            " (drun runs python3 -u ", script, " there); for a module write -m NAME"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string PythonInterpreter(const v1::JobSpec& spec, const EnvMap& env) {
  if (!spec.python_exec().empty()) return spec.python_exec();
  const std::string from_env = Value(env, "PYTHON_EXEC");
  return from_env.empty() ? "python3" : from_env;
}

std::string EnvironmentPython(const std::string& self_exe) {
  const auto slash = self_exe.rfind('/');
  if (slash == std::string::npos) return "";
  const std::string bin = self_exe.substr(0, slash);
  if (bin.substr(bin.rfind('/') + 1) != "bin") return "";
  const std::string python = bin + "/python3";
  if (!Executable(python)) return "";
  const v1::PythonEnv::Kind kind = InspectPythonEnv(python).kind();  // one reading of pyvenv.cfg/conda-meta
  return kind == v1::PythonEnv::VENV || kind == v1::PythonEnv::CONDA ? python : "";
}

std::vector<std::string> WorkerArgv(const v1::JobSpec& spec, const std::string& python) {
  std::vector<std::string> argv;
  switch (spec.kind()) {
    case v1::JobSpec::PYTHON_MODULE:
      argv = {python, "-u", "-m", spec.entrypoint()};
      break;
    case v1::JobSpec::PROGRAM:
      argv = {spec.entrypoint()};
      break;
    default:
      argv = {python, "-u", spec.entrypoint()};
      break;
  }
  argv.insert(argv.end(), spec.args().begin(), spec.args().end());
  return argv;
}

std::string FindProgram(const std::string& program, const EnvMap& env, const std::string& dir) {
  if (program.empty()) return "";
  if (program.find('/') != std::string::npos) {
    const std::string path = InDir(program, dir);
    return Executable(path) ? path : "";
  }
  auto it = env.find("PATH");
  const std::string path_var = it == env.end() ? "/usr/local/bin:/usr/bin:/bin" : it->second;
  for (absl::string_view d : absl::StrSplit(path_var, ':')) {
    const std::string candidate = absl::StrCat(d.empty() ? "." : d, "/", program);
    if (Executable(InDir(candidate, dir))) return candidate;
  }
  return "";
}

bool IsPythonInterpreter(const std::string& path) {
  absl::string_view base = path;
  if (size_t slash = base.rfind('/'); slash != absl::string_view::npos) base.remove_prefix(slash + 1);
  for (absl::string_view prefix : {"python", "pypy"}) {
    if (!absl::ConsumePrefix(&base, prefix)) continue;
    absl::ConsumeSuffix(&base, "-dbg");
    for (char c : base) {
      if (!absl::ascii_isdigit(c) && c != '.') return false;
    }
    return true;
  }
  return false;
}

absl::Status CheckEntrypoint(const v1::JobSpec& spec, const EnvMap& env) {
  EnvMap merged = env;
  for (const auto& [k, v] : spec.env()) merged[k] = v;
  if (spec.kind() == v1::JobSpec::PROGRAM) {
    if (!FindProgram(spec.entrypoint(), merged, spec.working_dir()).empty()) return absl::OkStatus();
    return Bad(absl::StrCat(spec.entrypoint(), ": ",
                            spec.entrypoint().find('/') != std::string::npos ? "no such executable file"
                                                                              : "not found on PATH",
                            " (--no-python runs it as the program)"));
  }
  if (absl::Status st = CheckInterpreter(spec, merged); !st.ok()) return st;
  if (spec.kind() == v1::JobSpec::PYTHON_SCRIPT) return CheckScript(spec);
  return absl::OkStatus();
}

std::string WorkerProgram(const v1::JobSpec& spec, const EnvMap& env) {
  EnvMap merged = env;
  for (const auto& [k, v] : spec.env()) merged[k] = v;
  const std::string program =
      spec.kind() == v1::JobSpec::PROGRAM ? spec.entrypoint() : PythonInterpreter(spec, merged);
  const std::string found = FindProgram(program, merged, spec.working_dir());
  return found.empty() ? program : found;
}

}  // namespace drun
