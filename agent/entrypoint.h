// What a worker runs (python3 -u script, python3 -u -m module, or a program)
// and the checks drun makes on each node before it starts any worker, so a
// typo or a missing interpreter fails once, in one line, instead of once per
// rank and restart.
#ifndef DRUN_AGENT_ENTRYPOINT_H_
#define DRUN_AGENT_ENTRYPOINT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/worker_env.h"
#include "drun/v1/job.pb.h"
#include "drun/v1/rendezvous.pb.h"

namespace drun {

// The interpreter for Python entrypoints: JobSpec.python_exec, else
// $PYTHON_EXEC of `env`, else "python3" (found on PATH).
std::string PythonInterpreter(const v1::JobSpec& spec, const EnvMap& env);

// The python3 of the venv or conda env that `self_exe` (drun's own executable, as
// /proc/self/exe names it) is installed in: "<env>/bin/python3" when self_exe is
// <env>/bin/<name>, <env> holds pyvenv.cfg (a venv) or conda-meta/ (a conda env) and
// <env>/bin/python3 is executable; else empty. The launcher makes it the default
// $PYTHON_EXEC (launcher/main_light.cc), as torchrun runs its own sys.executable.
std::string EnvironmentPython(const std::string& self_exe);

// The worker's argv, without the interpreter lookup.
std::vector<std::string> WorkerArgv(const v1::JobSpec& spec, const std::string& python);

// Where execvp would find `program` with the PATH of `env` (a program with a
// '/' is taken as is, relative to `dir`); empty when it is not there or not
// executable.
std::string FindProgram(const std::string& program, const EnvMap& env, const std::string& dir);

// "python", "python3", "/usr/bin/python3.11", "pypy3", ...
bool IsPythonInterpreter(const std::string& path);

// InvalidArgument with one line saying what is wrong and what to write: the
// interpreter is not there; the script is an interpreter (`drun python
// train.py`) or does not exist; the program is not found or not executable.
// `env` is the workers' environment before drun's own variables.
absl::Status CheckEntrypoint(const v1::JobSpec& spec, const EnvMap& env);

// The path of the program a worker of `spec` runs on this host (the
// interpreter for Python entrypoints), as execvp finds it; the name itself
// when it is not found.
std::string WorkerProgram(const v1::JobSpec& spec, const EnvMap& env);

}  // namespace drun

#endif  // DRUN_AGENT_ENTRYPOINT_H_
