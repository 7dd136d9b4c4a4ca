// The control socket: how `drun stacks` finds and asks a running job without
// the user typing a port.
//
// Every agent listens on a unix socket <control dir>/<pid>.sock. The control
// directory is per user: $XDG_RUNTIME_DIR/drun when XDG_RUNTIME_DIR is set,
// else /tmp/drun-<uid>. It is created mode 0700 and used only when it is a
// real directory owned by this user that nobody else may write; the agent
// also checks each caller's uid (SO_PEERCRED). So one user never sees,
// and cannot ask, another user's jobs.
//
// One connection carries one ControlRequest and one ControlReply (proto
// drun.v1, framed by rendezvous/base/frame.h). A socket whose agent died
// (connection refused) is stale and removed by the client that finds it.
#ifndef DRUN_AGENT_CONTROL_SOCKET_H_
#define DRUN_AGENT_CONTROL_SOCKET_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "drun/v1/control.pb.h"
#include "rendezvous/base/unique_fd.h"

namespace drun {

// The control directory for this user (see above); `create`: make it if missing.
absl::StatusOr<std::string> ControlDir(const std::map<std::string, std::string>& env, bool create);

class ControlListener {
 public:
  // Listens on <dir>/<pid>.sock (a stale file of that name is replaced).
  static absl::StatusOr<ControlListener> Open(const std::string& dir);
  ControlListener(ControlListener&&) = default;
  ControlListener& operator=(ControlListener&&) = default;
  ~ControlListener();  // removes the socket file

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  // A waiting caller of this user, with its request read (1 s at most); an
  // invalid fd when there was none, it belongs to another user, or it sent
  // nothing readable.
  UniqueFd Accept(v1::ControlRequest* request);

 private:
  ControlListener(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  UniqueFd fd_;
  std::string path_;
};

// Sends the reply (2 s at most; a caller that stopped reading loses it).
void SendControlReply(const UniqueFd& fd, const v1::ControlReply& reply);

// Client side: one request to the agent at `socket_path`, waiting up to
// `timeout_ms` for the reply. Unavailable when nothing listens there.
absl::StatusOr<v1::ControlReply> AskAgent(const std::string& socket_path,
                                          v1::ControlRequest::Kind kind, int timeout_ms);

// The answer of a whole_job socket: `header` (run id, host and pid of whoever
// gathered) with every node's reply, their ranks counted.
v1::ControlReply GatheredReply(v1::ControlReply header, std::vector<v1::ControlReply> nodes);

struct RunningJob {
  std::string socket_path;
  v1::ControlReply info;
};
// Every live agent in `dir` (stale sockets are removed), by pid.
std::vector<RunningJob> ListRunningJobs(const std::string& dir);

}  // namespace drun

#endif  // DRUN_AGENT_CONTROL_SOCKET_H_
