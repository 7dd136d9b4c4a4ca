// RendezvousState: the job's membership, rounds, rank assignment, restart
// budget and completion, as a pure state machine.
//
// No I/O, no threads, no clock: every input carries `now`, and every output is
// a list of messages addressed to nodes. The in-process rendezvous of
// `--standalone` and the gRPC service of a multi-node job both drive this one
// class, so the semantics below hold for both.
//
// Vocabulary (torchrun's): a *round* is one assignment of group ranks to a set
// of nodes; its workers run until they all succeed (the job finishes), one
// fails (a restart costs one unit of --max-restarts, or the job fails), or the
// membership changes (a restart that costs nothing).
//
// Promises:
//  - A round closes at max_nodes joined, or once min_nodes have joined and
//    last_call_timeout has passed since min was reached. A restart round closes
//    as soon as every surviving node of the previous round has re-joined.
//  - Surviving nodes keep their relative group-rank order; newcomers fill the
//    gaps; ranks are compact (0..n-1). RANK offsets add up local world sizes.
//  - Every node of a round gets the same restart_count.
//  - A node joining while the job runs below max triggers a free restart;
//    at max it waits as a spare and replaces the next node lost.
//  - A node is lost when its own silence passes keepalive_timeout (a stream
//    that ends: at once); time the server itself did not run and its
//    backlog of unhandled heartbeats are nobody's silence. Every accepted
//    node is told the job's pace (v1::Pace).
//  - Every node receives the same Finish (exit code and root-cause failure).
//    A failing job first stops every node; the root cause is the earliest
//    failure (by the worker's exit time) reported before they all stopped.
#ifndef DRUN_RENDEZVOUS_RENDEZVOUS_STATE_H_
#define DRUN_RENDEZVOUS_RENDEZVOUS_STATE_H_

#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "drun/v1/rendezvous.pb.h"
#include "rendezvous/failure_repeat.h"
#include "rendezvous/base/clock.h"

namespace drun {

// The job token's side of a Hello. rendezvous/join_auth.h has the one
// implementation (MakeTokenAuthority); it is an interface so that the state
// machine, and with it the in-process rendezvous of the light `drun`, links
// no cryptography.
class TokenAuthority {
 public:
  // One accepted stream's key: seals what the node is sent.
  class StreamKey {
   public:
    virtual ~StreamKey() = default;
    // Puts `spec_bytes` (a serialized JobSpec) sealed into a->sealed_spec.
    virtual void SealSpec(const std::string& spec_bytes, v1::Assignment* a) = 0;
  };
  struct Admission {
    v1::ServerMessage welcome;  // the server's proof, sent before anything else
    std::unique_ptr<StreamKey> key;
  };
  virtual ~TokenAuthority() = default;
  // `hello` proves the token on a stream whose Challenge carried `challenge`
  // (constant-time comparison), or nullopt.
  virtual std::optional<Admission> Admit(const std::string& challenge, const v1::Hello& hello) const = 0;
};

class RendezvousState {
 public:
  using NodeId = uint64_t;

  struct Config {
    int min_nodes = 1;
    int max_nodes = 1;
    int max_restarts = 0;
    std::string run_id;
    // Empty: no token required. Otherwise a Hello must prove it against its
    // stream's challenge through token_authority (RendezvousServer::Start
    // makes it; without one every Hello is refused), and each accepted node
    // is sent a Welcome and its Assignments' spec sealed.
    std::string token;
    std::shared_ptr<const TokenAuthority> token_authority;
    Duration last_call_timeout = std::chrono::seconds(30);
    Duration join_timeout = std::chrono::seconds(600);
    // Zero disables keepalive checking (in-process rendezvous).
    Duration keepalive_timeout = Duration::zero();
    // While keep-alives are checked, every accepted node is told (v1::Pace)
    // to send a heartbeat this often and that keepalive_timeout is the
    // silence either side bears (link_liveness.h, PaceFor).
    Duration heartbeat = std::chrono::seconds(5);
    // While keep-alives are checked, OnTick is due every sweep_period. A tick
    // that comes more than stall_tolerance late means this process itself did
    // not run (CPU starvation, a stopped or suspended host); that time is not
    // counted as anyone's silence, so an overloaded server does not declare
    // its nodes lost for its own delay.
    //
    // The server's backlog is nobody's silence either: a heartbeat stamped
    // with its agent's clock (OnHeartbeat's `sent`) and handled later than
    // that stream's quickest message was waiting in the server's queues
    // (read but not yet handled); silence is measured on a clock held back
    // by that delay, so a node is lost for being silent, never for the
    // server being late.
    Duration sweep_period = std::chrono::milliseconds(100);
    // The last runner: a node still running while every other node of the
    // round has succeeded. Only its word decides the job, and dropping it
    // restarts every node's finished work, so its silence is borne this long
    // (not keepalive_timeout) before it is dropped: a frozen agent whose
    // workers finished meanwhile reports on waking, and the job ends at 0.
    // A closed connection (a killed agent, a cut link) is still lost at once.
    // Never less than keepalive_timeout.
    Duration last_runner_silence = std::chrono::seconds(60);
    Duration stall_tolerance = std::chrono::milliseconds(50);
    bool use_agent_store = false;
    // --restart-policy always: a failure that repeats exactly (failure_repeat.h)
    // is restarted too, while the budget lasts. false: the second identical
    // failure in a row ends the job.
    bool restart_identical_failures = false;
    // Every member is started at once and none can come later (the tasks of
    // an srun step): a node lost (not one stopping on a signal) that leaves
    // fewer than min_nodes possible ends the job at once, naming it, instead
    // of waiting join_timeout for a newcomer that cannot come.
    bool closed_membership = false;
    // When set, every Assignment carries this MASTER_ADDR/PORT instead of
    // group rank 0's (static backend, or a store the host serves).
    std::string fixed_master_addr;
    int fixed_master_port = 0;
    // Where each round's store listens when it has a port of its own: ""
    // every interface; else the one address every node dials (the
    // rendezvous' own, docs/architecture.md "Where drun listens").
    std::string store_bind_addr;
    v1::JobSpec spec;
  };

  struct Outgoing {
    NodeId node;
    v1::ServerMessage msg;
  };
  using Outbox = std::vector<Outgoing>;

  explicit RendezvousState(Config config);

  // A node opened its stream and said hello. `peer_addr` is its address as
  // the server sees it (MASTER_ADDR when it becomes group rank 0);
  // `challenge` the nonce its stream's Challenge carried (with a token, the
  // hello's proof must cover it; a wrong proof is a "wrong job token").
  Outbox OnHello(NodeId node, const v1::Hello& hello, const std::string& peer_addr,
                 TimePoint now, const std::string& challenge = "");
  // A node wants to be in the next round; `free_port` is a port free on it,
  // used as MASTER_PORT if it becomes group rank 0. Also acknowledges a Stop.
  Outbox OnJoin(NodeId node, int free_port, TimePoint now);
  Outbox OnSucceeded(NodeId node, int64_t round, TimePoint now);
  Outbox OnFailed(NodeId node, int64_t round, const v1::Failure& failure, TimePoint now);
  // `sent`: the heartbeat's stamp, the time on the agent's own steady clock
  // when it was sent (v1::Heartbeat.sent_us); nullopt when unstamped.
  Outbox OnHeartbeat(NodeId node, TimePoint now, std::optional<Duration> sent = std::nullopt);
  // The node stops on `signal`: its loss, when it comes, is named that way.
  Outbox OnLeaving(NodeId node, int signal, TimePoint now);
  // The node's stream ended or its keepalive expired.
  Outbox OnLost(NodeId node, TimePoint now);
  // The one dispatch of an agent's report for both rendezvous (in-process
  // and gRPC): Join, Succeeded, Failed, Heartbeat (its stamp read here) and
  // Leaving. nullopt for every other kind: Hello (its peer address and
  // challenge are the transport's) and what only the gRPC server handles.
  std::optional<Outbox> OnReport(NodeId node, const v1::AgentMessage& m, TimePoint now);
  // Deadlines: last call, join timeout, keepalives.
  Outbox OnTick(TimePoint now);
  // The earliest time OnTick has something to do, if any.
  std::optional<TimePoint> NextDeadline() const;

  // Hosts lost since the last call (stream ended or keepalive expired), in
  // order; for launchers that replace lost nodes with spares.
  std::vector<std::string> TakeLostHosts() { return std::exchange(lost_hosts_, {}); }
  // The hosts whose Hello was accepted since the last call (a launcher's sign
  // that the agent it started there passed its checks and reached the job).
  std::vector<std::string> TakeArrivedHosts() { return std::exchange(arrived_hosts_, {}); }
  // The Finish every node was sent, once finished().
  const v1::Finish& finish() const { return finish_; }
  bool finished() const { return finished_; }
  int exit_code() const { return exit_code_; }
  int64_t round() const { return round_; }
  int restarts_used() const { return restarts_used_; }
  // Nodes currently known (joined, running, stopping or spare).
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  struct Member {
    NodeId node = 0;
    std::string host;    // as its Hello named it
    int node_rank = -1;  // its group rank in the current round; -1 when not in it
    std::string addr;        // its stream's peer address, as this server sees it
    std::string advertised;  // the address it says other nodes reach it at (Hello.addr)
  };
  // Every node currently known, with its place in the current round.
  std::vector<Member> Members() const;

  // --hang-timeout across nodes (HangQuiet): none of `node`'s ranks made
  // progress for the timeout (quiet), or one did again. Other rounds' word
  // is ignored.
  void OnQuiet(NodeId node, int64_t round, bool quiet);
  // Once per round, when every node of the running round is quiet or done
  // (its workers succeeded), at least one quiet: the round's nodes, to ask
  // for a hang dump.
  std::optional<std::vector<Member>> TakeHangVerdict();
  int num_waiting() const;
  std::string phase_name() const;
  // Total time the server was found not running (late ticks), excluded from
  // every node's silence.
  Duration stalled() const { return stalled_; }
  // How far behind its nodes the server is now: how much later than its
  // stream's quickest message the last stamped heartbeat was handled, plus
  // the time since, while that backlog may last (0 when it keeps up).
  Duration Behind(TimePoint now) const;

 private:
  enum class Phase { kWaiting, kRunning, kStopping, kFinished };
  enum class NodeState { kHello, kJoined, kRunning, kSucceeded, kStopping };

  struct Node {
    NodeState state = NodeState::kHello;
    v1::Hello hello;
    std::string addr;
    int free_port = 0;
    int group_rank = -1;  // in the last round it took part in
    int leaving_signal = 0;  // it said it stops on this signal
    int64_t join_seq = 0;
    // Time of the node's last message on the stall-free clock (now - stalled_).
    TimePoint seen;
    std::list<NodeId>::iterator seen_pos;  // its place in by_seen_
    std::unique_ptr<TokenAuthority::StreamKey> key;  // with a token: its stream's
    bool silence_said = false;  // as the last runner, its silence was told (SaySilence)
    // The least (server clock - stamp) of its heartbeats: their transit
    // without any queueing, plus the two clocks' difference.
    std::optional<Duration> quickest;
  };

  Outbox Finish(int exit_code, const std::string& message, const v1::Failure* failure);
  Outbox StopRound(const std::string& reason, TimePoint now);
  // Every participant of the running round has succeeded: the job's Finish.
  Outbox FinishIfAllSucceeded();
  // Every node of a stopping round has stopped: finish the job, or rendezvous again.
  Outbox StopComplete(TimePoint now);
  Outbox MaybeClose(TimePoint now);
  // The joined nodes that take part in the next round, in group-rank order:
  // requested ranks (static), else previous participants by their old group
  // rank, then newcomers by join order; at most max_nodes.
  std::vector<NodeId> RoundOrder() const;
  Outbox CloseRound(TimePoint now);
  void PutSpec(Node& n, std::string* spec_bytes, v1::Assignment* a);
  void EnterWaiting(TimePoint now);
  v1::ServerMessage WaitingMessage(v1::Waiting::Reason reason, TimePoint now) const;
  v1::ServerMessage PaceMessage() const;
  std::vector<NodeId> JoinedNodes() const;
  void SetState(Node& n, NodeState s);
  bool AnyStopping() const { return stopping_count_ > 0; }
  // The node sent something: it is alive now.
  void Touch(NodeId id, Node& n, TimePoint now);
  // The clock silence is measured on: `now` less the server's stalls and
  // its current backlog.
  TimePoint SilenceClock(TimePoint now) const;
  // A message's time on that clock, never before an earlier message's.
  TimePoint SeenAt(TimePoint now);
  // A stamped message of `n` was handled at `now`: how late it was.
  void NoteDelay(Node& n, TimePoint now, Duration sent);
  bool KeepaliveOn() const { return config_.keepalive_timeout > Duration::zero(); }
  bool IsLastRunner(const Node& n) const;
  Outbox DropSilent(TimePoint v_now, TimePoint now);
  Outbox SaySilence(Node& n, Duration silent, TimePoint now);

  Config config_;
  Phase phase_ = Phase::kWaiting;
  std::map<NodeId, Node> nodes_;
  std::set<NodeId> quiet_;         // of round quiet_round_
  int64_t quiet_round_ = -1;
  int64_t hang_called_round_ = -1;  // the round a verdict was given for
  int lost_members_ = 0;            // closed_membership: members lost for good
  std::vector<NodeId> participants_;  // of the current/last round, by group rank
  // Participants of the running round that left after their workers all
  // succeeded: still counted in the round's size (a newcomer waits as a spare).
  int finished_departed_ = 0;
  int64_t round_ = -1;
  int restarts_used_ = 0;
  int64_t join_counter_ = 0;
  int joined_count_ = 0;     // nodes in kJoined
  int succeeded_count_ = 0;  // nodes in kSucceeded
  int stopping_count_ = 0;   // nodes in kStopping
  // Nodes by their last message, oldest first: a message moves its node to
  // the back, so expiry looks only at the front (O(1) per message, not a
  // scan of every node).
  std::list<NodeId> by_seen_;
  Duration stalled_ = Duration::zero();
  // The latest backlog report (NoteDelay): a heartbeat handled d late at t.
  // Until t + d (what was queued with it may still be queued) silence is
  // measured at its send time: the clock moves only as far as the server
  // has handled what its nodes sent.
  struct Backlog {
    TimePoint clock;  // t - stalled_ - d
    TimePoint until;  // t + d
  };
  std::optional<Backlog> backlog_;
  std::optional<TimePoint> last_seen_;  // SeenAt's last value
  std::optional<TimePoint> last_sweep_;
  bool restart_round_ = false;  // waiting for the previous round's nodes
  std::optional<TimePoint> min_reached_at_;
  TimePoint waiting_since_;
  bool clock_started_ = false;
  bool finished_ = false;
  // Set when a failure spent the budget: the job finishes once the round has stopped.
  std::optional<v1::Failure> final_failure_;
  bool final_is_repeat_ = false;  // the job ends because a failure repeated
  FailureRepeat repeat_;
  std::string final_message_;
  v1::Finish finish_;
  std::vector<std::string> lost_hosts_;
  std::vector<std::string> arrived_hosts_;
  int exit_code_ = 0;
};

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_RENDEZVOUS_STATE_H_
