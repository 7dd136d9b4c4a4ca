#include "rendezvous/rendezvous_state.h"

#include <string.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rendezvous/base/signal_name.h"
#include "rendezvous/base/words.h"

namespace drun {

namespace {

v1::ServerMessage RejectMessage(const std::string& text) {
  v1::ServerMessage m;
  m.mutable_reject()->set_message(text);
  return m;
}

std::string HostOf(const v1::Hello& hello) {
  return hello.hostname().empty() ? std::string("?") : hello.hostname();
}

// "host vm was lost (node rank 2, 10.213.1.3)": several agents may share a
// machine's name, never its rank in the round and address together.
std::string NodeEvent(const v1::Hello& hello, int group_rank, const std::string& peer_addr,
                      absl::string_view what) {
  const std::string& addr = hello.addr().empty() ? peer_addr : hello.addr();
  std::vector<std::string> ids;
  if (group_rank >= 0) ids.push_back(absl::StrCat("node rank ", group_rank));
  if (!addr.empty()) ids.push_back(addr);
  std::string out = absl::StrCat("host ", HostOf(hello), " ", what);
  if (!ids.empty()) absl::StrAppend(&out, " (", absl::StrJoin(ids, ", "), ")");
  return out;
}

}  // namespace

RendezvousState::RendezvousState(Config config) : config_(std::move(config)) {
  if (config_.min_nodes < 1) config_.min_nodes = 1;
  if (config_.max_nodes < config_.min_nodes) config_.max_nodes = config_.min_nodes;
}

std::vector<RendezvousState::Member> RendezvousState::Members() const {
  std::vector<Member> members;
  for (const auto& [id, n] : nodes_) {
    // A node keeps its group rank for the whole round, even after a finished
    // peer left the participants.
    const bool in_round = phase_ != Phase::kWaiting &&
                          std::find(participants_.begin(), participants_.end(), id) !=
                              participants_.end();
    members.push_back({id, n.hello.hostname(), in_round ? n.group_rank : -1, n.addr,
                       n.hello.addr()});
  }
  return members;
}

void RendezvousState::OnQuiet(NodeId node, int64_t round, bool quiet) {
  if (round != round_ || phase_ != Phase::kRunning || !nodes_.count(node)) return;
  if (quiet_round_ != round_) {
    quiet_.clear();
    quiet_round_ = round_;
  }
  if (quiet) {
    quiet_.insert(node);
  } else {
    quiet_.erase(node);
  }
}

std::optional<std::vector<RendezvousState::Member>> RendezvousState::TakeHangVerdict() {
  if (phase_ != Phase::kRunning || quiet_round_ != round_ || hang_called_round_ == round_ ||
      quiet_.empty()) {
    return std::nullopt;
  }
  for (NodeId id : participants_) {
    auto n = nodes_.find(id);
    if (n == nodes_.end()) return std::nullopt;  // lost: the round is stopping anyway
    if (!quiet_.count(id) && n->second.state != NodeState::kSucceeded) return std::nullopt;
  }
  hang_called_round_ = round_;
  std::vector<Member> round;
  for (Member& m : Members()) {
    if (m.node_rank >= 0) round.push_back(std::move(m));
  }
  return round;
}

int RendezvousState::num_waiting() const { return joined_count_; }

void RendezvousState::SetState(Node& n, NodeState s) {
  // Counts kept with every transition, so a join or a success costs O(1)
  // instead of a scan of every node (O(N^2) per round at 10 000 nodes).
  if (n.state == NodeState::kJoined) --joined_count_;
  if (n.state == NodeState::kSucceeded) --succeeded_count_;
  if (n.state == NodeState::kStopping) --stopping_count_;
  n.state = s;
  if (s == NodeState::kJoined) ++joined_count_;
  if (s == NodeState::kSucceeded) ++succeeded_count_;
  if (s == NodeState::kStopping) ++stopping_count_;
}

void RendezvousState::Touch(NodeId id, Node& n, TimePoint now) {
  (void)id;
  n.seen = now - stalled_;
  by_seen_.splice(by_seen_.end(), by_seen_, n.seen_pos);
}

std::string RendezvousState::phase_name() const {
  switch (phase_) {
    case Phase::kWaiting: return "waiting";
    case Phase::kRunning: return "running";
    case Phase::kStopping: return "stopping";
    case Phase::kFinished: return "finished";
  }
  return "?";
}

std::vector<RendezvousState::NodeId> RendezvousState::JoinedNodes() const {
  std::vector<NodeId> out;
  for (const auto& [id, n] : nodes_) {
    if (n.state == NodeState::kJoined) out.push_back(id);
  }
  return out;
}

RendezvousState::Outbox RendezvousState::OnHello(NodeId node, const v1::Hello& hello,
                                                 const std::string& peer_addr, TimePoint now,
                                                 const std::string& challenge) {
  if (finished_) return {{node, RejectMessage("the job has already finished")}};
  if (hello.run_id() != config_.run_id) {
    return {{node, RejectMessage(absl::StrCat("run id '", hello.run_id(),
                                              "' does not match this job's run id '",
                                              config_.run_id, "'"))}};
  }
  std::optional<TokenAuthority::Admission> admitted;
  if (!config_.token.empty() && config_.token_authority) {
    admitted = config_.token_authority->Admit(challenge, hello);
  }
  if (!config_.token.empty() && !admitted) {
    return {{node, RejectMessage("wrong job token: set DRUN_RDZV_TOKEN (or --rdzv-token-file) "
                                 "to the token of this job")}};
  }
  if (nodes_.count(node)) return {{node, RejectMessage("duplicate hello on one stream")}};
  int want = hello.requested_node_rank();
  if (want >= config_.max_nodes) {
    return {{node, RejectMessage(absl::StrCat("--node-rank ", want, " is out of range: the job has ",
                                              Count(config_.max_nodes, "node"), " (ranks 0..",
                                              config_.max_nodes - 1, ")"))}};
  }
  if (want >= 0) {
    for (const auto& [id, n] : nodes_) {
      if (n.hello.requested_node_rank() == want) {
        return {{node, RejectMessage(absl::StrCat("duplicate --node-rank ", want,
                                                  ": already taken by host ", HostOf(n.hello)))}};
      }
    }
  }
  if (hello.local_world_size() < 1) {
    return {{node, RejectMessage("local world size must be at least 1")}};
  }
  if (!clock_started_) {
    // join_timeout counts from the first node's arrival.
    clock_started_ = true;
    waiting_since_ = now;
  }
  Node& n = nodes_[node];
  n.hello = hello;
  n.addr = peer_addr;
  n.seen = now - stalled_;
  n.seen_pos = by_seen_.insert(by_seen_.end(), node);
  if (KeepaliveOn() && !last_sweep_) last_sweep_ = now;
  arrived_hosts_.push_back(HostOf(hello));
  if (!admitted) return {};
  n.key = std::move(admitted->key);
  return {{node, std::move(admitted->welcome)}};
}

RendezvousState::Outbox RendezvousState::OnJoin(NodeId node, int free_port, TimePoint now) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return {};
  Node& n = it->second;
  Touch(node, n, now);
  n.free_port = free_port;
  if (finished_) return {};
  if (n.state == NodeState::kJoined) return {};
  const bool was_stopping = n.state == NodeState::kStopping;
  if (n.state == NodeState::kRunning || n.state == NodeState::kSucceeded) {
    // A participant asking for a new round: treat it like an ack of a stop.
    return {};
  }
  SetState(n, NodeState::kJoined);
  n.join_seq = ++join_counter_;

  switch (phase_) {
    case Phase::kWaiting: {
      Outbox out = MaybeClose(now);
      if (phase_ == Phase::kWaiting && out.empty()) {
        out.push_back({node, WaitingMessage(v1::Waiting::WAITING_FOR_NODES, now)});
      }
      return out;
    }
    case Phase::kRunning: {
      if (static_cast<int>(participants_.size()) + finished_departed_ < config_.max_nodes) {
        repeat_.OnRoundInterrupted();
        return StopRound(absl::StrCat("host ", HostOf(n.hello),
                                      " joined; restarting to include it"),
                         now);
      }
      return {{node, WaitingMessage(v1::Waiting::SPARE, now)}};
    }
    case Phase::kStopping: {
      if (was_stopping && !AnyStopping()) return StopComplete(now);
      return {{node, WaitingMessage(v1::Waiting::ROUND_STOPPING, now)}};
    }
    case Phase::kFinished:
      return {};
  }
  return {};
}

RendezvousState::Outbox RendezvousState::OnSucceeded(NodeId node, int64_t round, TimePoint now) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return {};
  Touch(node, it->second, now);
  if (phase_ != Phase::kRunning || round != round_) return {};
  if (it->second.state != NodeState::kRunning) return {};
  SetState(it->second, NodeState::kSucceeded);
  Outbox out = FinishIfAllSucceeded();
  // The round goes on: the node hears that its success counts (it may leave now).
  if (out.empty()) out.push_back({node, WaitingMessage(v1::Waiting::FINISHED, now)});
  return out;
}

RendezvousState::Outbox RendezvousState::FinishIfAllSucceeded() {
  // Only participants of the running round can be in kSucceeded.
  if (succeeded_count_ < static_cast<int>(participants_.size())) return {};
  return Finish(0, "all workers succeeded", nullptr);
}

RendezvousState::Outbox RendezvousState::OnFailed(NodeId node, int64_t round,
                                                  const v1::Failure& failure, TimePoint now) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return {};
  Touch(node, it->second, now);
  if (round != round_) return {};
  v1::Failure f = failure;
  if (f.exit_code() == 0) f.set_exit_code(1);
  auto final_message = [&](const v1::Failure& x) {
    std::string msg = DescribeFailure(x);
    if (config_.max_restarts > 0) {
      absl::StrAppend(&msg, " after ", Count(restarts_used_, "restart"), "; the restart budget is spent");
    }
    return msg;
  };
  if (phase_ == Phase::kStopping && final_failure_) {
    // The job is ending: of the failures of this round, the earliest one is
    // the root cause; a report that arrives first may be a consequence (a
    // peer's "connection closed") of a failure reported a moment later.
    if (!final_is_repeat_ && f.time_unix_s() > 0 &&
        f.time_unix_s() < final_failure_->time_unix_s()) {
      final_failure_ = f;
      final_message_ = final_message(f);
    }
    return {};
  }
  // Failures reported while a round stops for a restart are consequences.
  if (phase_ != Phase::kRunning) return {};
  final_is_repeat_ = repeat_.OnRoundFailed(f) && !config_.restart_identical_failures;
  if (final_is_repeat_) {
    final_failure_ = f;
    final_message_ = absl::StrCat(DescribeRepeat(f),
                                  "; not restarting a failure that repeats (--restart-policy "
                                  "always restarts it anyway)");
    return StopRound(final_message_, now);
  }
  if (restarts_used_ < config_.max_restarts) {
    ++restarts_used_;
    return StopRound(absl::StrCat(DescribeFailure(f), "; restart ", restarts_used_, " of ",
                                  config_.max_restarts),
                     now);
  }
  // No budget left: stop every node, then finish once they all have, with the
  // earliest failure reported meanwhile as the root cause.
  final_failure_ = f;
  final_message_ = final_message(f);
  return StopRound(final_message_, now);
}

RendezvousState::Outbox RendezvousState::StopComplete(TimePoint now) {
  if (final_failure_) {
    const v1::Failure f = *final_failure_;
    return Finish(f.exit_code(), final_message_, &f);
  }
  EnterWaiting(now);
  return MaybeClose(now);
}

RendezvousState::Outbox RendezvousState::OnHeartbeat(NodeId node, TimePoint now) {
  auto it = nodes_.find(node);
  if (it != nodes_.end()) Touch(node, it->second, now);
  return {};
}

RendezvousState::Outbox RendezvousState::OnLeaving(NodeId node, int signal, TimePoint now) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return {};
  Touch(node, it->second, now);
  it->second.leaving_signal = signal;
  return {};
}

RendezvousState::Outbox RendezvousState::OnLost(NodeId node, TimePoint now) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return {};
  const NodeState state = it->second.state;
  const std::string host = HostOf(it->second.hello);
  const Node& gone = it->second;
  const std::string lost = NodeEvent(
      gone.hello, gone.group_rank, gone.addr,
      gone.leaving_signal > 0 ? absl::StrCat("stopped on ", SignalName(gone.leaving_signal))
                              : std::string("was lost"));
  lost_hosts_.push_back(host);
  const bool stopping_on_signal = gone.leaving_signal > 0;
  SetState(it->second, NodeState::kHello);  // keeps the counts right
  by_seen_.erase(it->second.seen_pos);
  nodes_.erase(it);
  participants_.erase(std::remove(participants_.begin(), participants_.end(), node),
                      participants_.end());
  if (finished_) return {};
  // Its workers all succeeded: the node has finished its part, and losing it
  // now restarts no one; the round ends when the others succeed too.
  if (phase_ == Phase::kRunning && state == NodeState::kSucceeded) {
    ++finished_departed_;
    return FinishIfAllSucceeded();
  }
  if (config_.closed_membership && !stopping_on_signal &&
      config_.max_nodes - ++lost_members_ < config_.min_nodes) {
    // The Stop says at once which node was lost (srun may signal the others
    // right after); the Finish ends the job instead of a rejoin.
    Outbox out;
    if (phase_ == Phase::kRunning && state == NodeState::kRunning) {
      out = StopRound(lost, now);
    }
    Outbox fin = Finish(1,
                        absl::StrCat(lost, "; ", config_.max_nodes - lost_members_, " of at least ",
                                     config_.min_nodes, " are left and no other can join (an srun "
                                     "step's tasks are fixed)"),
                        nullptr);
    out.insert(out.end(), fin.begin(), fin.end());
    return out;
  }
  switch (phase_) {
    case Phase::kRunning:
      if (state == NodeState::kRunning) {
        repeat_.OnRoundInterrupted();
        return StopRound(lost, now);
      }
      return {};
    case Phase::kStopping:
      if (!AnyStopping()) return StopComplete(now);
      return {};
    case Phase::kWaiting:
      return MaybeClose(now);
    case Phase::kFinished:
      return {};
  }
  return {};
}

RendezvousState::Outbox RendezvousState::OnTick(TimePoint now) {
  Outbox out;
  if (finished_) return out;
  if (KeepaliveOn() && last_sweep_) {
    const TimePoint due = *last_sweep_ + config_.sweep_period;
    if (now >= due) {
      // A late tick is time this process did not run: nobody's silence.
      if (now - due > config_.stall_tolerance) stalled_ += now - due - config_.stall_tolerance;
      last_sweep_ = now;
    }
    Outbox o = DropSilent(now - stalled_, now);
    out.insert(out.end(), o.begin(), o.end());
    if (nodes_.empty()) last_sweep_.reset();  // no one to watch: no ticks
  }
  if (phase_ == Phase::kWaiting) {
    Outbox o = MaybeClose(now);
    out.insert(out.end(), o.begin(), o.end());
  }
  if (phase_ == Phase::kWaiting && clock_started_ && now - waiting_since_ >= config_.join_timeout) {
    const int joined = num_waiting();
    Outbox o = Finish(1,
                      absl::StrCat("rendezvous timed out: ", joined, " of at least ",
                                   Count(config_.min_nodes, "node"), " joined within join_timeout (",
                                   std::chrono::duration_cast<std::chrono::seconds>(
                                       config_.join_timeout)
                                       .count(),
                                   " s)"),
                      nullptr);
    out.insert(out.end(), o.begin(), o.end());
  }
  return out;
}

bool RendezvousState::IsLastRunner(const Node& n) const {
  return phase_ == Phase::kRunning && !finished_ && n.state == NodeState::kRunning &&
         succeeded_count_ + 1 == static_cast<int>(participants_.size());
}

// Oldest silence first; the sweep stops at the first node heard from within
// its bound (all after it were heard from later), passing over the last
// runner while it is inside its longer one.
RendezvousState::Outbox RendezvousState::DropSilent(TimePoint v_now, TimePoint now) {
  Outbox out;
  for (auto pos = by_seen_.begin(); pos != by_seen_.end() && !finished_;) {
    const NodeId id = *pos;
    Node& n = nodes_.at(id);
    const Duration silent = v_now - n.seen;
    if (silent <= config_.keepalive_timeout) break;
    const bool last_runner = IsLastRunner(n);
    if (last_runner && silent <= config_.last_runner_silence) {
      Outbox o = SaySilence(n, silent, now);
      out.insert(out.end(), o.begin(), o.end());
      ++pos;
      continue;
    }
    const Duration bound = last_runner ? config_.last_runner_silence : config_.keepalive_timeout;
    ++pos;  // OnLost erases `id` from by_seen_
    // Tell the node, should it wake up (a stopped process): it is out.
    out.push_back({id, RejectMessage(absl::StrCat(
                           "nothing came from this node for ",
                           std::chrono::duration_cast<std::chrono::seconds>(bound).count(),
                           " s (a stopped or stuck drun): it was dropped from the job"))});
    Outbox o = OnLost(id, now);
    out.insert(out.end(), o.begin(), o.end());
    pos = by_seen_.begin();  // OnLost may have changed who is the last runner
  }
  return out;
}

// Once: the finished node of the lowest group rank says that the job waits
// for the silent last runner, and how long (no wait is ever silent).
RendezvousState::Outbox RendezvousState::SaySilence(Node& n, Duration silent, TimePoint now) {
  if (std::exchange(n.silence_said, true)) return {};
  auto secs = [](Duration d) { return std::chrono::duration_cast<std::chrono::seconds>(d).count(); };
  v1::ServerMessage m = WaitingMessage(v1::Waiting::LAST_RUNNER_SILENT, now);
  m.mutable_waiting()->set_reason(absl::StrCat(
      NodeEvent(n.hello, n.group_rank, n.addr, "is silent"), ": ", secs(silent),
      " s now, and every other node has finished; its word decides the job: waiting up to ",
      secs(config_.last_runner_silence), " s for it, then the round restarts"));
  for (NodeId id : participants_) {
    if (nodes_.at(id).state == NodeState::kSucceeded) return {{id, std::move(m)}};
  }
  return {};
}

std::optional<TimePoint> RendezvousState::NextDeadline() const {
  if (finished_) return std::nullopt;
  std::optional<TimePoint> next;
  auto consider = [&](TimePoint t) {
    if (!next || t < *next) next = t;
  };
  if (KeepaliveOn() && last_sweep_) consider(*last_sweep_ + config_.sweep_period);
  if (phase_ == Phase::kWaiting && clock_started_) {
    consider(waiting_since_ + config_.join_timeout);
    if (min_reached_at_) consider(*min_reached_at_ + config_.last_call_timeout);
  }
  return next;
}

void RendezvousState::EnterWaiting(TimePoint now) {
  phase_ = Phase::kWaiting;
  waiting_since_ = now;
  min_reached_at_.reset();
}

namespace {

// The words shown for each reason (agents print them; they decide on the enum).
const char* WaitingText(v1::Waiting::Reason reason) {
  switch (reason) {
    case v1::Waiting::WAITING_FOR_NODES:
      return "waiting for nodes";
    case v1::Waiting::LAST_CALL:
      return "last call";
    case v1::Waiting::SPARE:
      return "spare: the job runs at its maximum size";
    case v1::Waiting::ROUND_STOPPING:
      return "waiting for the current round to stop";
    case v1::Waiting::FINISHED:
      return "its workers all succeeded; waiting for the others to finish";
    case v1::Waiting::LAST_RUNNER_SILENT:
      return "the last node still running is silent";
    default:
      return "";
  }
}

}  // namespace

v1::ServerMessage RendezvousState::WaitingMessage(v1::Waiting::Reason reason, TimePoint now) const {
  v1::ServerMessage m;
  auto* w = m.mutable_waiting();
  w->set_kind(reason);
  w->set_joined(num_waiting());
  w->set_min_nodes(config_.min_nodes);
  w->set_max_nodes(config_.max_nodes);
  w->set_reason(WaitingText(reason));
  if (phase_ == Phase::kWaiting && min_reached_at_) {
    auto left = *min_reached_at_ + config_.last_call_timeout - now;
    w->set_last_call_ms(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(left).count()));
  }
  return m;
}

RendezvousState::Outbox RendezvousState::MaybeClose(TimePoint now) {
  if (phase_ != Phase::kWaiting) return {};
  const int joined = num_waiting();
  if (joined >= config_.max_nodes) return CloseRound(now);
  if (joined < config_.min_nodes) {
    min_reached_at_.reset();
    return {};
  }
  // A restart closes as soon as the survivors are back: waiting for the last
  // call again would add 30 s to every restart.
  if (restart_round_) return CloseRound(now);
  if (now - min_reached_at_.value_or(now) >= config_.last_call_timeout) return CloseRound(now);
  if (!min_reached_at_) {
    // The last call starts: tell every waiting node once (O(n), not per join).
    min_reached_at_ = now;
    Outbox out;
    for (NodeId id : JoinedNodes()) out.push_back({id, WaitingMessage(v1::Waiting::LAST_CALL, now)});
    return out;
  }
  return {};
}

// With a token the spec goes sealed under the node's own stream key
// (join_auth.h): it holds the -x values. `spec_bytes` caches its serialization.
void RendezvousState::PutSpec(Node& n, std::string* spec_bytes, v1::Assignment* a) {
  if (!n.key) {
    *a->mutable_spec() = config_.spec;
    return;
  }
  if (spec_bytes->empty()) *spec_bytes = config_.spec.SerializeAsString();
  n.key->SealSpec(*spec_bytes, a);
}

std::vector<RendezvousState::NodeId> RendezvousState::RoundOrder() const {
  std::vector<NodeId> joined = JoinedNodes();
  const bool static_ranks = std::any_of(joined.begin(), joined.end(), [&](NodeId id) {
    return nodes_.at(id).hello.requested_node_rank() >= 0;
  });
  std::sort(joined.begin(), joined.end(), [&](NodeId a, NodeId b) {
    const Node& na = nodes_.at(a);
    const Node& nb = nodes_.at(b);
    if (static_ranks) {
      return na.hello.requested_node_rank() < nb.hello.requested_node_rank();
    }
    const bool pa = na.group_rank >= 0, pb = nb.group_rank >= 0;
    if (pa != pb) return pa;
    if (pa) return na.group_rank < nb.group_rank;
    return na.join_seq < nb.join_seq;
  });
  if (static_cast<int>(joined.size()) > config_.max_nodes) joined.resize(config_.max_nodes);
  return joined;
}

RendezvousState::Outbox RendezvousState::CloseRound(TimePoint now) {
  ++round_;
  participants_ = RoundOrder();
  finished_departed_ = 0;
  restart_round_ = false;
  phase_ = Phase::kRunning;

  int world_size = 0;
  for (NodeId id : participants_) world_size += nodes_.at(id).hello.local_world_size();
  const Node& head = nodes_.at(participants_.front());
  const std::string master_addr =
      config_.fixed_master_addr.empty() ? head.addr : config_.fixed_master_addr;
  const int master_port =
      config_.fixed_master_port > 0 ? config_.fixed_master_port : head.free_port;

  Outbox out;
  int offset = 0;
  std::string spec_bytes;  // serialized once, sealed once per node
  for (size_t i = 0; i < participants_.size(); ++i) {
    Node& n = nodes_.at(participants_[i]);
    SetState(n, NodeState::kRunning);
    n.group_rank = static_cast<int>(i);
    v1::ServerMessage m;
    auto* a = m.mutable_assignment();
    a->set_round(round_);
    a->set_group_rank(static_cast<int>(i));
    a->set_group_world_size(static_cast<int>(participants_.size()));
    a->set_rank_offset(offset);
    a->set_world_size(world_size);
    a->set_restart_count(restarts_used_);
    a->set_master_addr(master_addr);
    a->set_master_port(master_port);
    a->set_use_agent_store(config_.use_agent_store);
    PutSpec(n, &spec_bytes, a);
    offset += n.hello.local_world_size();
    out.push_back({participants_[i], std::move(m)});
  }
  for (NodeId id : JoinedNodes()) {
    out.push_back({id, WaitingMessage(v1::Waiting::SPARE, now)});
  }
  return out;
}

RendezvousState::Outbox RendezvousState::StopRound(const std::string& reason, TimePoint now) {
  phase_ = Phase::kStopping;
  restart_round_ = true;
  Outbox out;
  for (NodeId id : participants_) {
    Node& n = nodes_.at(id);
    if (n.state == NodeState::kRunning || n.state == NodeState::kSucceeded) {
      SetState(n, NodeState::kStopping);
      v1::ServerMessage m;
      m.mutable_stop()->set_round(round_);
      m.mutable_stop()->set_reason(reason);
      out.push_back({id, std::move(m)});
    }
  }
  if (!AnyStopping()) {
    Outbox o = StopComplete(now);
    out.insert(out.end(), o.begin(), o.end());
  }
  return out;
}

RendezvousState::Outbox RendezvousState::Finish(int exit_code, const std::string& message,
                                                const v1::Failure* failure) {
  phase_ = Phase::kFinished;
  finished_ = true;
  exit_code_ = exit_code;
  finish_.set_exit_code(exit_code);
  finish_.set_message(message);
  if (failure) *finish_.mutable_failure() = *failure;
  Outbox out;
  for (const auto& [id, n] : nodes_) {
    v1::ServerMessage m;
    auto* f = m.mutable_finish();
    f->set_exit_code(exit_code);
    f->set_message(message);
    if (failure) *f->mutable_failure() = *failure;
    out.push_back({id, std::move(m)});
  }
  return out;
}

}  // namespace drun
