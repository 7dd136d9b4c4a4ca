// One-line hints under the summary's root cause, for failures whose cause
// drun recognises in the failed worker's last stderr lines (the user's program
// speaks there; drun's own errors are never read back this way).
//
// Recognition is one table (kSignatures in root_cause_hints.cc): each row is
// a typed cause, the text a program prints for it and who prints that text
// (torch 2.6 writes "was build without libuv support", torch 2.14 "was built
// without libuv support"); ClassifyStderr maps the lines to the
// set of causes, and each cause has one hint, shaped by what the worker's host
// recorded in the Failure (its interpreter's kind, its USE_LIBUV):
//  - kNoTorch: how to get torch for that interpreter: into the venv, or the
//    venv recreated with --system-site-packages; into the conda env; for
//    pyenv's Python; apt's python3-torch for the system's;
//  - kTorchWithoutLibuv: USE_LIBUV=0 (drun then lets rank 0 host the store,
//    launcher/job/worker_store.h); when the workers had it already, the
//    program's own TCPStore needs use_libuv=False;
//  - kStdinEnded: --stdin.
#ifndef DRUN_AGENT_ROOT_CAUSE_HINTS_H_
#define DRUN_AGENT_ROOT_CAUSE_HINTS_H_

#include <set>
#include <string>
#include <vector>

#include "drun/v1/rendezvous.pb.h"

namespace drun {

enum class FailureCause {
  kNoTorch,            // ModuleNotFoundError: No module named 'torch'
  kTorchWithoutLibuv,  // TCPStore asked for libuv that this torch lacks
  kStdinEnded,         // input() or pdb read end-of-file
};

std::set<FailureCause> ClassifyStderr(const v1::Failure& failure);

std::vector<std::string> RootCauseHints(const v1::Failure& failure);

}  // namespace drun

#endif  // DRUN_AGENT_ROOT_CAUSE_HINTS_H_
