// StacksRelay: gathers every node's stack dump for one `drun stacks` request
// (docs/stacks.md). The process that hosts the rendezvous server cannot read
// other nodes' workers; their agents can. So a request from any node's agent
// (StacksRequest) or from the launcher itself (RendezvousServer::AskStacks)
// becomes one StacksWanted to every node of the job, and the replies become
// one answer, by node rank. A --hang-timeout verdict gathers the same way.
//
// Pure: no I/O, time is an input. The server feeds it the members at the
// start, each StacksReply, each lost stream and the clock; it says whom to
// ask and which requests are complete. A node that is lost, or does not
// answer within the timeout, gets an error reply in the answer, so one stuck
// node never holds up the others' stacks.
#ifndef DRUN_RENDEZVOUS_STACKS_RELAY_H_
#define DRUN_RENDEZVOUS_STACKS_RELAY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "drun/v1/control.pb.h"
#include "rendezvous/base/clock.h"
#include "rendezvous/rendezvous_state.h"

namespace drun {

class StacksRelay {
 public:
  using NodeId = RendezvousState::NodeId;
  using Member = RendezvousState::Member;
  // Who asked: a node's agent (`drun stacks` on its machine), the process
  // that hosts the server (`drun stacks` on the launcher's machine), or the
  // server's own --hang-timeout verdict.
  struct Asker {
    enum class Kind { kNode, kLocal, kHang };
    Kind kind = Kind::kLocal;
    NodeId node = 0;          // kNode: the asking agent's node
    uint64_t request_id = 0;  // kNode: the agent's number; kLocal: AskStacks()'s; kHang: the round
  };
  struct Ask {  // send StacksWanted{id} to node
    NodeId node;
    uint64_t id;
  };
  struct Done {
    Asker asker;
    std::vector<v1::ControlReply> nodes;  // by node rank, then host
  };

  // Below the 60 s `drun stacks` waits for its answer: a late node is named.
  static constexpr Duration kTimeout = std::chrono::seconds(45);
  // A gRPC message is at most 4 MiB by default: an answer stays under this,
  // each node's dump cut to its share (the node's dump file keeps it whole).
  static constexpr size_t kAnswerBudget = 3u << 20;
  // Cuts reply->dump to `budget` bytes at a line end, saying so.
  static void CapDump(v1::ControlReply* reply, size_t budget);

  // Starts a request; returns whom to ask (a request with no members is
  // done at once).
  std::vector<Ask> Start(Asker asker, std::vector<Member> members, TimePoint now);
  // A node's reply to request `id` (unknown ids and repeats are ignored).
  void OnReply(NodeId node, uint64_t id, v1::ControlReply reply);
  // The node's stream ended: it answers every request it owes with an error.
  void OnLost(NodeId node);
  std::optional<TimePoint> NextDeadline() const;
  // The requests every node answered, and those past their deadline.
  std::vector<Done> TakeDone(TimePoint now);

 private:
  struct Pending {
    Asker asker;
    TimePoint deadline;
    std::vector<Member> members;
    std::map<NodeId, v1::ControlReply> replies;
  };
  static Done Complete(Pending& p);

  std::map<uint64_t, Pending> pending_;
  uint64_t next_id_ = 0;
};

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_STACKS_RELAY_H_
