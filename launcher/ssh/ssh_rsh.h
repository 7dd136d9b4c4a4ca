// --rsh 'CMD': the remote agent started as a local child `CMD HOST <drun> agent`
// (`ssh -p 2222`, `docker exec -i`, `kubectl exec -i`...) for sites where
// libssh does not fit. Its standard input is a pipe that stays open as the
// agent's lifeline; its output comes back on two pipes.
#ifndef DRUN_LAUNCHER_SSH_SSH_RSH_H_
#define DRUN_LAUNCHER_SSH_SSH_RSH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launcher/ssh/ssh_session.h"

namespace drun {

// Splits CMD like a shell would split plain words (quotes '...' and "..."
// and backslash escapes; no expansions). An empty or unbalanced CMD is an error.
absl::StatusOr<std::vector<std::string>> SplitRshCommand(const std::string& cmd);

// Spawns argv (looked up on PATH) in its own process group, with the default
// signal mask and dispositions, and writes stdin_data to its standard input.
absl::StatusOr<std::unique_ptr<RemoteProcess>> StartRshProcess(const std::vector<std::string>& argv,
                                                               const std::string& stdin_data);

}  // namespace drun

#endif  // DRUN_LAUNCHER_SSH_SSH_RSH_H_
