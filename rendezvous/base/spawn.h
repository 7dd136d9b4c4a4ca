// SpawnInOwnGroup: starts a helper program of the launcher's (an --rsh
// command, srun, a local tar) the one way drun starts them: in a process group
// of its own, so that a Ctrl-C on the terminal reaches drun only, which
// decides what the helper gets; with an empty signal mask and every signal at
// its default disposition, whatever drun blocks or handles itself. Worker
// processes are started elsewhere (agent/process.h), with more to arrange.
#ifndef DRUN_RENDEZVOUS_BASE_SPAWN_H_
#define DRUN_RENDEZVOUS_BASE_SPAWN_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace drun {

// The child's standard descriptors: a descriptor to give it (dup2'ed; the
// caller closes its own copy after the call), kInherit for drun's own, or
// kDevNull.
struct SpawnStdio {
  static constexpr int kInherit = -1;
  static constexpr int kDevNull = -2;
  int in = kInherit;
  int out = kInherit;
  int err = kInherit;
};

// argv[0] is looked up in PATH unless it holds a '/'. Returns 0 and the
// child's pid in *pid, or the errno of the failure (for the caller's line).
int SpawnInOwnGroup(const std::vector<std::string>& argv, const SpawnStdio& stdio, pid_t* pid);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_SPAWN_H_
