// `drun stacks [RUN_ID]`: prints where every rank of a running job is, from
// any shell of the same user on a machine where one of its agents runs
// (docs/hangs.md). It finds the job through the per-user control directory
// (agent/control_socket.h), so nobody types a port; with several jobs
// running it asks for a run id, and it never sees another user's jobs.
// The dump goes to stdout, drun's own lines to stderr.
#ifndef DRUN_LAUNCHER_STACKS_COMMAND_H_
#define DRUN_LAUNCHER_STACKS_COMMAND_H_

#include <map>
#include <string>
#include <vector>

namespace drun {

// `args` are the words after "stacks". Returns the exit code: 0 with a dump,
// 1 when no job (or no such job) runs, 2 for bad usage or several jobs.
int RunStacksCommand(const std::vector<std::string>& args,
                     const std::map<std::string, std::string>& env);

}  // namespace drun

#endif  // DRUN_LAUNCHER_STACKS_COMMAND_H_
