// Which torch the workers will import, asked once per node before the first
// round, so that their environment names what that torch reads
// (agent/worker_env.h): torch 1.13 reads NCCL_ASYNC_ERROR_HANDLING only;
// torch 2.2 and later read TORCH_NCCL_ASYNC_ERROR_HANDLING and warn about the
// old name ("Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use
// TORCH_NCCL_ASYNC_ERROR_HANDLING instead"), as torchrun of each version sets
// only its own.
//
// The probe runs the workers' interpreter with their environment and working
// directory on a few lines that find torch's package and read its version.py
// without importing torch (tens of milliseconds, not the seconds of an import).
// A program (--no-python), an interpreter without torch, or a probe that fails
// or takes longer than its bound gives an unknown version.
#ifndef DRUN_AGENT_TORCH_PROBE_H_
#define DRUN_AGENT_TORCH_PROBE_H_

#include <chrono>
#include <string>

#include "agent/worker_env.h"
#include "drun/v1/job.pb.h"

namespace drun {

struct TorchVersion {
  bool known = false;
  int major = 0;
  int minor = 0;
  std::string text;  // "2.14.1+debian"
};

// "1.13.1", "2.14.1+debian", "2.6.0a0+git1234": major and minor; unknown otherwise.
TorchVersion ParseTorchVersion(const std::string& text);

// The version `python` (with `env`, in `cwd`) would import; unknown on any failure.
TorchVersion ProbeTorchVersion(const std::string& python, const EnvMap& env, const std::string& cwd,
                               std::chrono::milliseconds bound);

// The workers' torch for `spec`: unknown for programs (--no-python).
TorchVersion ProbeWorkersTorch(const v1::JobSpec& spec, const EnvMap& base_env);

// Which of the two names of NCCL's async error handling that torch reads.
NcclErrorVar NcclErrorVarFor(const TorchVersion& v);

}  // namespace drun

#endif  // DRUN_AGENT_TORCH_PROBE_H_
