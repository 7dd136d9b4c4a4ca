#include "rendezvous/rendezvous_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "drun/v1/rendezvous.grpc.pb.h"
#include "rendezvous/base/deadline_queue.h"
#include "rendezvous/base/endpoint.h"
#include "rendezvous/base/mutex.h"
#include "rendezvous/base/say.h"
#include "rendezvous/base/tls_relay.h"
#include "rendezvous/base/unique_fd.h"
#include "rendezvous/base/wake_fd.h"
#include "rendezvous/first_bytes.h"
#include "rendezvous/join_auth.h"
#include "rendezvous/link_liveness.h"
#include "rendezvous/round_store.h"
#include "rendezvous/stacks_relay.h"

namespace drun {

Duration FinishGrace(int nodes) {
  return std::chrono::seconds(2) + std::chrono::microseconds(500) * std::max(0, nodes - 4000);
}

std::string PeerHost(const std::string& peer) {
  std::string p = absl::StrReplaceAll(peer, {{"%5B", "["}, {"%5D", "]"}});
  size_t colon = p.find(':');
  if (colon == std::string::npos) return p;
  const std::string rest = p.substr(colon + 1);  // drop "ipv4:" / "ipv6:"
  auto ep = ParseEndpoint(rest, 0, PortZero::kAllow);
  if (!ep.ok()) return rest;
  std::string host = ep->host;
  // An IPv4 client of a dual-stack listener: show the IPv4 address.
  if (host.rfind("::ffff:", 0) == 0 && host.find('.') != std::string::npos) host = host.substr(7);
  return host;
}

namespace {

class Stream;

// Owns the state machine and the live streams; every entry point locks mu_.
class Core {
 public:
  explicit Core(RendezvousState::Config config)
      : state_(config), store_(config.fixed_master_port, config.store_bind_addr) {
    timer_ = std::thread([this] { TimerLoop(); });
  }
  ~Core() {
    {
      MutexLock l(&mu_);
      stop_ = true;
    }
    cv_.SignalAll();
    timer_.join();
  }

  int event_fd() const { return events_.fd(); }
  std::optional<RendezvousServer::Event> NextEvent() { return events_.Take(); }

  RendezvousState::NodeId Register(Stream* s) {
    MutexLock l(&mu_);
    RendezvousState::NodeId id = ++next_id_;
    streams_[id] = s;
    return id;
  }
  void Unregister(RendezvousState::NodeId id) {
    MutexLock l(&mu_);
    streams_.erase(id);
  }
  // `challenge`: the nonce the stream's Challenge carried (join_auth.h).
  void Handle(RendezvousState::NodeId id, const v1::AgentMessage& m, const std::string& peer,
              const std::string& challenge);

  // Connections accepted by drun's own listener reach gRPC as descriptors,
  // and gRPC names such a peer "fd:N": the acceptor notes the address.
  void NotePeer(int fd, std::string host) {
    MutexLock l(&peers_mu_);
    peers_[fd] = std::move(host);
  }
  std::string PeerOf(const std::string& grpc_peer) {
    if (grpc_peer.rfind("fd:", 0) == 0) {
      MutexLock l(&peers_mu_);
      auto it = peers_.find(atoi(grpc_peer.c_str() + 3));
      if (it != peers_.end()) return it->second;
    }
    return PeerHost(grpc_peer);
  }
  void Lost(RendezvousState::NodeId id);
  // The launcher's own `drun stacks` request (RendezvousServer::AskStacks).
  uint64_t refused_connections() const { return store_.refused_connections(); }
  uint64_t AskStacks() {
    MutexLock l(&mu_);
    const uint64_t id = ++local_stacks_id_;
    StartStacks({StacksRelay::Asker::Kind::kLocal, 0, id}, Clock::now());
    WakeTimerIfEarlier();
    return id;
  }

  // One port: the store is reached through the rendezvous listener (before
  // any agent connects), which hands store connections over here.
  void ServeStoreThroughListener(int port) { store_.ServeThroughListener(port); }
  void AdoptStoreConnection(UniqueFd fd) { store_.Adopt(std::move(fd)); }  // its own lock, not mu_

 private:
  // The state machine's messages go out; its news (arrivals, losses, the
  // end) become events. `arrived_addr`: where the nodes that arrive now
  // are (a Hello's), when known.
  void Dispatch(RendezvousState::Outbox out, const std::string* arrived_addr = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WakeTimerIfEarlier() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<TimePoint> NextDeadline() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `drun stacks` through the relay.
  void StartStacks(StacksRelay::Asker asker, TimePoint now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AskNodes(StacksRelay::Asker asker, std::vector<StacksRelay::Member> members, TimePoint now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeliverStacks(TimePoint now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendHangFound(int64_t round, std::vector<v1::ControlReply> nodes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every node of the round is quiet (--hang-timeout): ask each for a hang dump.
  void MaybeCallHang(TimePoint now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimerLoop();

  Mutex mu_;
  CondVar cv_;  // the timer thread waits on it
  RendezvousState state_ ABSL_GUARDED_BY(mu_);
  // Not mu_'s: it has a lock of its own (round_store.h). Apply and SetMembers
  // run under mu_, in the order the state machine gives; Adopt on the acceptor's thread.
  RoundStore store_;
  StacksRelay relay_ ABSL_GUARDED_BY(mu_);
  uint64_t local_stacks_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<RendezvousState::NodeId, Stream*> streams_ ABSL_GUARDED_BY(mu_);
  Mailbox<RendezvousServer::Event> events_;  // to the launcher's loop
  bool finish_reported_ ABSL_GUARDED_BY(mu_) = false;
  RendezvousState::NodeId next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<TimePoint> timer_waits_for_ ABSL_GUARDED_BY(mu_);  // the timer thread's deadline
  Mutex peers_mu_;
  std::map<int, std::string> peers_ ABSL_GUARDED_BY(peers_mu_);  // accepted fd -> peer host
  std::thread timer_;
};

class Stream : public grpc::ServerBidiReactor<v1::AgentMessage, v1::ServerMessage> {
 public:
  // Every stream opens with a fresh Challenge: the agent's proof of the job
  // token must cover it, so a Hello captured on another stream is worthless.
  Stream(Core* core, grpc::CallbackServerContext* ctx)
      : core_(core), peer_(core->PeerOf(ctx->peer())), challenge_(NewNonce()) {
    id_ = core_->Register(this);
    Enqueue(ChallengeMessage(challenge_), false);
    StartRead(&in_);
  }

  // Called with the core's lock held; takes only this stream's lock.
  void Enqueue(v1::ServerMessage m, bool close_after) {
    MutexLock l(&mu_);
    if (finished_) return;
    out_.push_back(std::move(m));
    if (close_after) close_after_writes_ = true;
    if (!writing_) {
      writing_ = true;
      StartWrite(&out_.front());
    }
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      core_->Lost(id_);
      MaybeFinish();
      return;
    }
    if (in_.has_heartbeat()) Answer();
    core_->Handle(id_, in_, peer_, challenge_);
    StartRead(&in_);
  }

  // A heartbeat's reply is work that can wait: while anything is queued on
  // this stream (the server is behind on it), that answers the agent as well
  // (any word from the server proves it alive), so no reply is added.
  void Answer() {
    MutexLock l(&mu_);
    if (finished_ || !out_.empty()) return;
    out_.emplace_back();
    out_.back().mutable_heartbeat();
    writing_ = true;
    StartWrite(&out_.front());
  }

  void OnWriteDone(bool ok) override {
    {
      MutexLock l(&mu_);
      out_.pop_front();
      if (ok && !out_.empty()) {
        StartWrite(&out_.front());
        return;
      }
      writing_ = false;
      if (ok && !close_after_writes_) return;
    }
    MaybeFinish();
  }

  void OnCancel() override { core_->Lost(id_); }

  void OnDone() override {
    core_->Unregister(id_);
    delete this;
  }

 private:
  // Finish() is called without our lock held: gRPC may run OnDone (which
  // deletes this) as soon as it is called.
  void MaybeFinish() {
    {
      MutexLock l(&mu_);
      if (finished_) return;
      if (writing_) {
        close_after_writes_ = true;  // finish once the queue drains
        return;
      }
      finished_ = true;
    }
    Finish(grpc::Status::OK);
  }

  Core* core_;
  std::string peer_;
  const std::string challenge_;
  RendezvousState::NodeId id_ = 0;
  v1::AgentMessage in_;
  Mutex mu_;
  std::deque<v1::ServerMessage> out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool close_after_writes_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

void Core::Handle(RendezvousState::NodeId id, const v1::AgentMessage& m, const std::string& peer,
                  const std::string& challenge) {
  MutexLock l(&mu_);
  const TimePoint now = Clock::now();
  switch (m.kind_case()) {
    case v1::AgentMessage::kHello: {
      const std::string addr = m.hello().addr().empty() ? peer : m.hello().addr();
      // An arrival this Hello caused is this node's: say where it is (launcher/main_net.cc
      // learns the hosting machine's address toward the other nodes from it).
      Dispatch(state_.OnHello(id, m.hello(), addr, now, challenge), &addr);
      break;
    }
    case v1::AgentMessage::kSucceeded:
      Dispatch(*state_.OnReport(id, m, now));
      MaybeCallHang(now);  // a node whose workers are done counts as quiet
      break;
    case v1::AgentMessage::kStacksRequest:
      StartStacks({StacksRelay::Asker::Kind::kNode, id, m.stacks_request().request_id()}, now);
      break;
    case v1::AgentMessage::kStacksReply:
      relay_.OnReply(id, m.stacks_reply().request_id(), m.stacks_reply().reply());
      DeliverStacks(now);
      break;
    case v1::AgentMessage::kHangQuiet:
      state_.OnQuiet(id, m.hang_quiet().round(), m.hang_quiet().quiet());
      MaybeCallHang(now);
      break;
    case v1::AgentMessage::kNodeReport: {
      events_.Post({RendezvousServer::Event::kReport, "", {}, 0, {}, m.node_report()});
      auto it = streams_.find(id);
      if (it != streams_.end()) {
        v1::ServerMessage ack;
        ack.mutable_report_received();
        it->second->Enqueue(std::move(ack), false);
      }
      break;
    }
    case v1::AgentMessage::kJoin:
    case v1::AgentMessage::kFailed:
    case v1::AgentMessage::kHeartbeat:
    case v1::AgentMessage::kLeaving:
      Dispatch(*state_.OnReport(id, m, now));  // the state machine's alone
      break;
    case v1::AgentMessage::KIND_NOT_SET:
      break;
  }
  WakeTimerIfEarlier();
}

void Core::Lost(RendezvousState::NodeId id) {
  MutexLock l(&mu_);
  const TimePoint now = Clock::now();
  Dispatch(state_.OnLost(id, now));
  relay_.OnLost(id);
  DeliverStacks(now);
  WakeTimerIfEarlier();
}

void Core::StartStacks(StacksRelay::Asker asker, TimePoint now) {
  AskNodes(asker, state_.Members(), now);
}

void Core::MaybeCallHang(TimePoint now) {
  std::optional<std::vector<StacksRelay::Member>> round = state_.TakeHangVerdict();
  if (!round) return;
  AskNodes({StacksRelay::Asker::Kind::kHang, 0, static_cast<uint64_t>(state_.round())}, *std::move(round),
           now);
}

void Core::AskNodes(StacksRelay::Asker asker, std::vector<StacksRelay::Member> members, TimePoint now) {
  const bool for_hang = asker.kind == StacksRelay::Asker::Kind::kHang;
  for (const StacksRelay::Ask& ask : relay_.Start(asker, std::move(members), now)) {
    auto it = streams_.find(ask.node);
    if (it == streams_.end()) {
      relay_.OnLost(ask.node);
      continue;
    }
    v1::ServerMessage m;
    m.mutable_stacks_wanted()->set_request_id(ask.id);
    m.mutable_stacks_wanted()->set_for_hang(for_hang);
    it->second->Enqueue(std::move(m), false);
  }
  DeliverStacks(now);
}

// The hang dumps go to every node of the round, whose agents pick the rank
// that stands out; that rank's agent reports the round's failure.
void Core::SendHangFound(int64_t round, std::vector<v1::ControlReply> nodes) {
  v1::ServerMessage m;
  m.mutable_hang_found()->set_round(round);
  for (v1::ControlReply& r : nodes) *m.mutable_hang_found()->add_nodes() = std::move(r);
  for (const StacksRelay::Member& member : state_.Members()) {
    auto it = streams_.find(member.node);
    if (member.node_rank >= 0 && it != streams_.end()) it->second->Enqueue(m, false);
  }
}

// Complete answers go to whoever asked: an agent's stream, or the launcher's events.
void Core::DeliverStacks(TimePoint now) {
  for (StacksRelay::Done& d : relay_.TakeDone(now)) {
    if (d.asker.kind == StacksRelay::Asker::Kind::kHang) {
      SendHangFound(static_cast<int64_t>(d.asker.request_id), std::move(d.nodes));
      continue;
    }
    if (d.asker.kind == StacksRelay::Asker::Kind::kLocal) {
      RendezvousServer::Event e{RendezvousServer::Event::kStacks, "", {}, 0, {}, {}};
      e.stacks_id = d.asker.request_id;
      e.stacks = std::move(d.nodes);
      events_.Post(std::move(e));
      continue;
    }
    auto it = streams_.find(d.asker.node);
    if (it == streams_.end()) continue;  // the asker is gone
    v1::ServerMessage m;
    v1::StacksGathered* g = m.mutable_stacks_gathered();
    g->set_request_id(d.asker.request_id);
    for (v1::ControlReply& r : d.nodes) *g->add_nodes() = std::move(r);
    it->second->Enqueue(std::move(m), false);
  }
}

std::optional<TimePoint> Core::NextDeadline() const {
  std::optional<TimePoint> a = state_.NextDeadline();
  std::optional<TimePoint> b = relay_.NextDeadline();
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}

void Core::WakeTimerIfEarlier() {
  // Most messages (heartbeats) only move deadlines later: the timer thread
  // needs waking only when something is due before what it waits for.
  std::optional<TimePoint> next = NextDeadline();
  if (next && (!timer_waits_for_ || *next < *timer_waits_for_)) cv_.Signal();
}

void Core::Dispatch(RendezvousState::Outbox out, const std::string* arrived_addr) {
  if (std::any_of(out.begin(), out.end(), [](const auto& o) { return o.msg.has_assignment(); })) {
    // A round starts: its nodes (and their workers) may reach its store.
    std::vector<std::string> ips;
    for (const RendezvousState::Member& m : state_.Members()) {
      if (m.node_rank < 0) continue;
      ips.push_back(m.addr);
      ips.push_back(m.advertised);
    }
    store_.SetMembers(ips);
  }
  if (absl::Status s = store_.Apply(&out); !s.ok()) {
    // Without its store the round cannot run: end the job for everyone.
    for (auto& o : out) {
      o.msg.Clear();
      o.msg.mutable_finish()->set_exit_code(1);
      o.msg.mutable_finish()->set_message(absl::StrCat("cannot start the c10d store: ", s.message()));
    }
  }
  for (std::string& host : state_.TakeArrivedHosts()) {
    RendezvousServer::Event e{RendezvousServer::Event::kNodeArrived, std::move(host), {}, 0, {}, {}};
    if (arrived_addr) e.addr = *arrived_addr;
    events_.Post(std::move(e));
  }
  for (std::string& host : state_.TakeLostHosts()) {
    events_.Post({RendezvousServer::Event::kNodeLost, std::move(host), {}, 0, {}, {}});
  }
  if (state_.finished() && !finish_reported_) {
    finish_reported_ = true;
    events_.Post({RendezvousServer::Event::kFinished, "", state_.finish(), 0, {}, {}});
  }
  for (auto& o : out) {
    auto it = streams_.find(o.node);
    if (it == streams_.end()) continue;
    const bool reject = o.msg.has_reject();
    it->second->Enqueue(std::move(o.msg), reject);
  }
}

void Core::TimerLoop() {
  MutexLock l(&mu_);
  while (!stop_) {
    std::optional<TimePoint> next = NextDeadline();
    timer_waits_for_ = next;
    if (next) {
      cv_.WaitUntil(&mu_, *next);
    } else {
      cv_.Wait(&mu_);
    }
    timer_waits_for_.reset();
    if (stop_) break;
    const TimePoint now = Clock::now();
    if (next && now >= *next) {
      std::optional<TimePoint> state_due = state_.NextDeadline();
      if (state_due && now >= *state_due) Dispatch(state_.OnTick(now));
      DeliverStacks(now);
    }
  }
}

class Service final : public v1::Rendezvous::CallbackService {
 public:
  explicit Service(Core* core) : core_(core) {}
  grpc::ServerBidiReactor<v1::AgentMessage, v1::ServerMessage>* Attach(
      grpc::CallbackServerContext* ctx) override {
    return new Stream(core_, ctx);
  }

 private:
  Core* core_;
};

// A connection accepted on a shared port, waiting for its first bytes. Owns
// its descriptor until it is handed on (Release).
struct PendingConn {
  UniqueFd fd;
  std::string peer;
};


// The listening socket is drun's own: every agent connection gets its
// link-liveness options (link_liveness.h) before gRPC takes it over, which
// gRPC's own listener has no way to do; and on a shared port (see the
// header) each connection is sorted by its first bytes first.
class ServerImpl : public RendezvousServer {
 public:
  ServerImpl(RendezvousState::Config config, Options options, std::shared_ptr<const TlsContext> tls)
      : tls_(std::move(tls)),
        link_timeout_(LinkTimeout(config.spec)),
        first_bytes_timeout_(options.first_bytes_timeout),
        fixed_master_port_(config.fixed_master_port),
        core_(std::make_unique<Core>(std::move(config))),
        service_(core_.get()) {}
  ~ServerImpl() override { Shutdown(Duration::zero()); }

  absl::Status Listen(const std::string& addr) {
    const auto busy = absl::UnavailableError(absl::StrCat(
        "cannot listen on ", addr,
        " (the port is in use, or the address is not on this host); pick another "
        "--rdzv-endpoint port"));
    // One grammar for every HOST:PORT drun reads (rendezvous/base/endpoint.h).
    auto ep = ParseEndpoint(addr, /*default_port=*/-1, PortZero::kAllow);
    if (!ep.ok() || ep->port < 0) return busy;
    auto sa = NumericSockAddr(*ep);
    if (!sa.ok()) return busy;
    const bool v6 = sa->family() == AF_INET6;
    sockaddr_storage ss = sa->storage;
    socklen_t len = sa->len;
    listen_fd_.reset(socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!listen_fd_.valid()) return busy;
    const int one = 1, zero = 0;
    setsockopt(listen_fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (v6) setsockopt(listen_fd_.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if (bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
        listen(listen_fd_.get(), 4096) != 0 ||
        getsockname(listen_fd_.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
      return busy;
    }
    port_ = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                     : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    // The configured master port is this listener's: the store shares it.
    shared_ = fixed_master_port_ > 0 && fixed_master_port_ == port_;
    if (shared_) core_->ServeStoreThroughListener(port_);
    if (absl::Status st = StartTlsRelay(); !st.ok()) return st;
    return StartServing();
  }
  int port() const override { return port_; }
  bool serves_store() const override { return shared_; }
  int event_fd() const override { return core_->event_fd(); }
  std::optional<Event> NextEvent() override { return core_->NextEvent(); }
  uint64_t AskStacks() override { return core_->AskStacks(); }
  uint64_t refused_connections() const override { return core_->refused_connections() + tls_refused_; }
  void Shutdown(Duration grace) override {
    if (acceptor_.joinable()) {
      stop_.Signal();
      acceptor_.join();
      shutdown(listen_fd_.get(), SHUT_RDWR);  // refuse new connections from now on
      pending_.clear();                 // closes connections still silent
      silent_per_peer_.clear();
    }
    if (!server_) return;
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::duration_cast<std::chrono::system_clock::duration>(grace));
    server_.reset();
  }

 private:
  // epoll tags of the acceptor; pending connections use ids from kFirstPending.
  static constexpr uint64_t kListenTag = 0;
  static constexpr uint64_t kStopTag = 1;
  static constexpr uint64_t kFirstPending = 2;
  // Connections one address may hold open before it has spoken: a node's
  // agent and its workers' store clients speak at once, so even a node of
  // many workers never has this many silent at a time.
  static constexpr int kMaxSilentPerPeer = 64;

  absl::Status StartServing() {
    grpc::ServerBuilder b;
    b.RegisterService(&service_);
    // Agents' transport keepalive pings are welcome at any rate.
    b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 200);
    b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
    b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    server_ = b.BuildAndStart();
    if (!server_) return absl::InternalError("cannot start the rendezvous service");
    epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_fd_.valid() || !stop_.valid() || !Watch(listen_fd_.get(), kListenTag, EPOLLIN) ||
        !Watch(stop_.fd(), kStopTag, EPOLLIN)) {
      return absl::InternalError("cannot start the rendezvous listener (epoll)");
    }
    acceptor_ = std::thread([this] { AcceptLoop(); });
    return absl::OkStatus();
  }

  // With --rdzv-tls, every agent connection is TLS, handshaken in the relay's
  // thread (never the acceptor's). The first refusal of each kind is one line
  // on the host's console; the rest are only counted.
  absl::Status StartTlsRelay() {
    if (!tls_) return absl::OkStatus();
    TlsRelay::Options o;
    o.handshake_timeout = first_bytes_timeout_;
    o.on_refused = [this](const std::string& peer, TlsFailure, const std::string& why) {
      tls_refused_++;
      if (!said_tls_refused_.exchange(true)) {
        Say(absl::StrCat("the rendezvous refused a TLS connection from ", peer, ": ", why,
                         " (further refusals are only counted)"));
      }
    };
    auto relay = TlsRelay::Start(std::move(o));
    if (!relay.ok()) return relay.status();
    relay_ = std::move(*relay);
    return absl::OkStatus();
  }

  // A plain gRPC client at a rendezvous that requires TLS: closed unread.
  void RefusePlain(const std::string& peer) {
    tls_refused_++;
    if (!said_plain_refused_.exchange(true)) {
      Say(absl::StrCat("the rendezvous refused a connection without TLS from ", peer,
                       ": this job's agents need --rdzv-tls (further refusals are only counted)"));
    }
  }

  bool Watch(int fd, uint64_t tag, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag;
    return epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) == 0;
  }

  void AcceptLoop() {
    constexpr int kMaxEvents = 64;
    epoll_event events[kMaxEvents];
    for (;;) {
      const int n = epoll_wait(epoll_fd_.get(), events, kMaxEvents, silent_.PollTimeoutMs(Clock::now()));
      if (n < 0 && errno != EINTR) return;
      for (int i = 0; i < n; ++i) {
        const uint64_t tag = events[i].data.u64;
        if (tag == kStopTag) return;
        if (tag == kListenTag) {
          AcceptReady();
        } else {
          Sort(tag, events[i].events);
        }
      }
      CloseSilent(Clock::now());
    }
  }

  void AcceptReady() {
    for (;;) {
      sockaddr_storage peer{};
      socklen_t peer_len = sizeof peer;
      UniqueFd fd(accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&peer), &peer_len,
                          SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!fd) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        // Out of descriptors or memory: the connection waits in the backlog.
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          poll(nullptr, 0, 50);
        }
        return;  // EAGAIN, or an error the next round retries
      }
      // Every connection is sorted by its first bytes, on a port of its own
      // too: garbage is closed before gRPC parses it, and a connection that
      // never speaks is closed after first_bytes_timeout.
      // Edge-triggered: peeking leaves the bytes unread, so a level-triggered
      // descriptor would stay ready; each new arrival is a new edge.
      std::string ip = SockAddrIp(peer);
      // A peer that opens connections faster than it speaks (a flood) holds at
      // most kMaxSilentPerPeer descriptors here; the rest close at once.
      int& waiting = silent_per_peer_[ip];
      if (waiting >= kMaxSilentPerPeer) continue;  // fd closes itself
      const uint64_t id = next_pending_++;
      if (!Watch(fd.get(), id, EPOLLIN | EPOLLRDHUP | EPOLLET)) continue;  // fd closes itself
      waiting++;
      pending_.emplace(id, PendingConn{std::move(fd), std::move(ip)});
      silent_.Add(id, Clock::now() + first_bytes_timeout_);
    }
  }

  // A shared-port connection has news: peek at its first bytes and send it on.
  void Sort(uint64_t id, uint32_t events) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    char buf[kFirstBytesPeek];
    const ssize_t n = recv(it->second.fd.get(), buf, sizeof buf, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    FirstBytes kind = n > 0 ? ClassifyFirstBytes(absl::string_view(buf, static_cast<size_t>(n)))
                            : FirstBytes::kGarbage;  // closed or failed before speaking
    // A peer that has finished sending cannot complete a preface any more.
    if (kind == FirstBytes::kNeedMore && (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
      kind = FirstBytes::kGarbage;
    if (kind == FirstBytes::kNeedMore) return;
    if (kind == FirstBytes::kStore && !shared_) kind = FirstBytes::kGarbage;  // no store here
    if (kind == FirstBytes::kTls && !tls_) kind = FirstBytes::kGarbage;      // TLS not asked for
    PendingConn conn = TakePending(it);
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, conn.fd.get(), nullptr);
    if (kind == FirstBytes::kGrpc && tls_) {
      RefusePlain(conn.peer);  // conn closes itself
    } else if (kind == FirstBytes::kGrpc) {
      ToGrpc(conn.fd.release(), std::move(conn.peer));  // gRPC owns it from here
    } else if (kind == FirstBytes::kTls) {
      ToTls(std::move(conn));
    } else if (kind == FirstBytes::kStore) {
      core_->AdoptStoreConnection(std::move(conn.fd));
    }  // kGarbage: closed by conn's destructor
  }

  // Store connections keep the kernel's defaults, as on a store's own port.
  void ToGrpc(int fd, std::string peer) {
    SetLinkTimeout(fd, link_timeout_);
    core_->NotePeer(fd, std::move(peer));
    grpc::AddInsecureChannelFromFd(server_.get(), fd);
  }

  // gRPC gets the relay's plain end; the socket keeps its link-liveness options.
  void ToTls(PendingConn conn) {
    SetLinkTimeout(conn.fd.get(), link_timeout_);
    auto plain = relay_->Accept(std::move(conn.fd), *tls_, conn.peer);
    if (!plain.ok()) return;  // out of descriptors: the agent retries or fails clearly
    core_->NotePeer(plain->get(), std::move(conn.peer));
    grpc::AddInsecureChannelFromFd(server_.get(), plain->release());
  }

  // Connections silent past first_bytes_timeout_ are closed.
  void CloseSilent(TimePoint now) {
    for (uint64_t id : silent_.TakeDue(now)) {
      auto it = pending_.find(id);
      if (it != pending_.end()) TakePending(it);  // closes it
    }
  }

  // Takes a connection out of the pending ones.
  PendingConn TakePending(std::map<uint64_t, PendingConn>::iterator it) {
    PendingConn conn = std::move(it->second);
    silent_.Cancel(it->first);
    pending_.erase(it);
    auto peer = silent_per_peer_.find(conn.peer);
    if (peer != silent_per_peer_.end() && --peer->second <= 0) silent_per_peer_.erase(peer);
    return conn;
  }

  const std::shared_ptr<const TlsContext> tls_;  // null without --rdzv-tls
  std::atomic<uint64_t> tls_refused_{0};
  std::atomic<bool> said_tls_refused_{false};
  std::atomic<bool> said_plain_refused_{false};
  const std::chrono::milliseconds link_timeout_;
  const Duration first_bytes_timeout_;
  const int fixed_master_port_;
  std::unique_ptr<Core> core_;
  Service service_;
  std::unique_ptr<TlsRelay> relay_;  // outlives server_, whose connections it carries
  std::unique_ptr<grpc::Server> server_;
  UniqueFd listen_fd_;
  UniqueFd epoll_fd_;
  WakeFd stop_;  // Shutdown() wakes the acceptor with it
  int port_ = 0;
  bool shared_ = false;  // the workers' store is served on this port
  std::thread acceptor_;
  // Acceptor thread only: shared-port connections that have not spoken yet.
  std::map<uint64_t, PendingConn> pending_;
  std::map<std::string, int> silent_per_peer_;  // pending_ by peer address
  DeadlineQueue<uint64_t> silent_;  // pending_'s: when each is closed unheard
  uint64_t next_pending_ = kFirstPending;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(
    const std::string& listen_addr, RendezvousState::Config config) {
  return Start(listen_addr, std::move(config), Options());
}

absl::StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(
    const std::string& listen_addr, RendezvousState::Config config, Options options) {
  // One stream per agent and one or two store connections per worker: a large
  // job needs more descriptors than the usual soft limit of 1024.
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  // Hellos prove the token against their stream's Challenge (join_auth.h).
  if (!config.token.empty() && !config.token_authority) {
    config.token_authority = MakeTokenAuthority(config.token, config.run_id);
  }
  // --rdzv-tls: this host's certificate is the server's (tls_relay.h).
  std::shared_ptr<const TlsContext> tls;
  if (config.spec.has_tls()) {
    const v1::TlsFiles& f = config.spec.tls();
    auto ctx = TlsContext::Load(TlsContext::Side::kServer, f.cert(), f.key(), f.ca());
    if (!ctx.ok()) return ctx.status();
    tls = *std::move(ctx);
  }
  auto s = std::make_unique<ServerImpl>(std::move(config), options, std::move(tls));
  if (absl::Status st = s->Listen(listen_addr); !st.ok()) return st;
  return std::unique_ptr<RendezvousServer>(std::move(s));
}

}  // namespace drun
