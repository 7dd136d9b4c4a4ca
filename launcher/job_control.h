// JobControl: the control socket (agent/control_socket.h) of a launcher that
// runs no agent itself (--hostfile over ssh, --launcher slurm), so that
// `drun stacks` on the launching machine finds the job and prints every
// node's ranks: a STACKS request becomes RendezvousServer::AskStacks, and
// the kStacks event that answers it goes back to each caller that waits.
//
// Single-threaded: the launcher's loop polls fd() and hands over kStacks
// events.
#ifndef DRUN_LAUNCHER_JOB_CONTROL_H_
#define DRUN_LAUNCHER_JOB_CONTROL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/control_socket.h"
#include "rendezvous/rendezvous_server.h"

namespace drun {

class JobControl {
 public:
  // Listens in the user's control directory; nullopt, said in one line, when
  // there is none (the job runs, `drun stacks` will not find it).
  static std::optional<JobControl> Open(const std::map<std::string, std::string>& env,
                                        const std::string& run_id, RendezvousServer* server);
  int fd() const { return listener_.fd(); }
  const std::string& path() const { return listener_.path(); }
  // A caller: INFO is answered at once, STACKS when every node has answered.
  void OnReadable();
  // A kStacks event of the server.
  void OnStacks(const RendezvousServer::Event& e);

 private:
  JobControl(ControlListener l, std::string run_id, RendezvousServer* server)
      : listener_(std::move(l)), run_id_(std::move(run_id)), server_(server) {}
  v1::ControlReply Header() const;

  ControlListener listener_;
  std::string run_id_;
  RendezvousServer* server_;
  std::map<uint64_t, std::vector<UniqueFd>> waiting_;  // by AskStacks number
};

}  // namespace drun

#endif  // DRUN_LAUNCHER_JOB_CONTROL_H_
