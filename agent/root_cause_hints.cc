#include "agent/root_cause_hints.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace drun {
namespace {

enum class Where { kAnywhere, kLineStart };

struct Signature {
  FailureCause cause;
  Where where;
  const char* text;
  const char* source;  // who prints it, for the reader of this table
};

// Every text drun recognises. Lines may carry torch's "[rank0]: " prefix.
constexpr Signature kSignatures[] = {
    {FailureCause::kNoTorch, Where::kAnywhere, "No module named 'torch'", "CPython's import"},
    {FailureCause::kTorchWithoutLibuv, Where::kAnywhere,
     "use_libuv was requested but PyTorch was build without libuv support", "torch 2.6's TCPStore (Debian 13)"},
    {FailureCause::kTorchWithoutLibuv, Where::kAnywhere,
     "use_libuv was requested but PyTorch was built without libuv support", "torch 2.14's TCPStore (Debian sid)"},
    {FailureCause::kStdinEnded, Where::kLineStart, "EOFError", "input() at end-of-file"},
    {FailureCause::kStdinEnded, Where::kLineStart, "bdb.BdbQuit", "pdb's quit at end-of-file"},
};

bool Matches(const Signature& s, const std::string& line) {
  return s.where == Where::kLineStart ? absl::StartsWith(line, s.text) : absl::StrContains(line, s.text);
}

std::string NoTorchHint(const v1::Failure& f) {
  const std::string ran = f.program().empty() ? "python3" : f.program();
  const v1::PythonEnv& env = f.python_env();
  switch (env.kind()) {
    case v1::PythonEnv::VENV:
      if (env.system_site_packages() || env.base_interpreter().empty()) {
        return absl::StrCat("the workers ran ", ran, ", of the venv ", env.prefix(),
                            ", which has no torch: install it there (", env.prefix(), "/bin/pip install torch)");
      }
      return absl::StrCat("the workers ran ", ran, ", of the venv ", env.prefix(),
                          ", which has no torch: install it there (", env.prefix(),
                          "/bin/pip install torch), or use the torch of ", env.base_interpreter(),
                          " by recreating the venv with ", env.base_interpreter(),
                          " -m venv --system-site-packages ", env.prefix());
    case v1::PythonEnv::CONDA:
      return absl::StrCat("the workers ran ", ran, ", of the conda env ", env.prefix(),
                          ", which has no torch: install it there (conda install -p ", env.prefix(),
                          " pytorch, or ", env.prefix(), "/bin/pip install torch)");
    case v1::PythonEnv::PYENV:
      return absl::StrCat("the workers ran ", ran, ", pyenv's Python (", env.prefix(),
                          "), which has no torch: pip install torch for it, or set PYTHON_EXEC to an "
                          "interpreter that has torch (Debian's python3-torch: /usr/bin/python3)");
    case v1::PythonEnv::SYSTEM:
      return absl::StrCat("the workers ran ", ran, ", the system's Python, which has no torch: install it "
                          "(Debian and Ubuntu: apt install python3-torch), or set PYTHON_EXEC to an "
                          "interpreter that has torch");
    default:
      return absl::StrCat("the workers ran ", ran, ", which has no torch: install torch for it, or set "
                          "PYTHON_EXEC to an interpreter that has torch");
  }
}

std::string NoLibuvHint(const v1::Failure& f) {
  if (f.use_libuv_off()) {
    return "this PyTorch is built without libuv, and a TCPStore of the program asked for it although "
           "the workers have USE_LIBUV=0: create that TCPStore with use_libuv=False";
  }
  return "this PyTorch is built without libuv, but its TCPStore asks for libuv unless told not to: "
         "run with USE_LIBUV=0 (USE_LIBUV=0 drun ..., or -x USE_LIBUV=0; drun then lets rank 0 "
         "host the workers' store, docs/migrating.md)";
}

}  // namespace

std::set<FailureCause> ClassifyStderr(const v1::Failure& failure) {
  std::set<FailureCause> causes;
  for (const std::string& line : failure.stderr_tail()) {
    for (const Signature& s : kSignatures) {
      if (Matches(s, line)) causes.insert(s.cause);
    }
  }
  return causes;
}

std::vector<std::string> RootCauseHints(const v1::Failure& failure) {
  std::vector<std::string> hints;
  for (FailureCause cause : ClassifyStderr(failure)) {
    switch (cause) {
      case FailureCause::kStdinEnded:
        if (failure.rank() < 0) break;
        hints.push_back(absl::StrCat(
            "rank ", failure.rank(), " read end-of-file from its stdin (input(), breakpoint()): "
            "unless --stdin names it, a rank reads end-of-file; --stdin all gives every rank the "
            "lines typed to drun"));
        break;
      case FailureCause::kNoTorch:
        hints.push_back(NoTorchHint(failure));
        break;
      case FailureCause::kTorchWithoutLibuv:
        hints.push_back(NoLibuvHint(failure));
        break;
    }
  }
  return hints;
}

}  // namespace drun
