#include "rendezvous/rendezvous_server.h"

#include <grpcpp/grpcpp.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "drun/v1/rendezvous.grpc.pb.h"
#include "rendezvous/round_store.h"

namespace drun {

std::string PeerHost(const std::string& peer) {
  std::string p = absl::StrReplaceAll(peer, {{"%5B", "["}, {"%5D", "]"}});
  size_t colon = p.find(':');
  if (colon == std::string::npos) return p;
  std::string rest = p.substr(colon + 1);  // drop "ipv4:" / "ipv6:"
  if (!rest.empty() && rest[0] == '[') {
    size_t close = rest.find(']');
    std::string host = rest.substr(1, close == std::string::npos ? std::string::npos : close - 1);
    if (host.rfind("::ffff:", 0) == 0 && host.find('.') != std::string::npos) host = host.substr(7);
    return host;
  }
  size_t last = rest.rfind(':');
  return last == std::string::npos ? rest : rest.substr(0, last);
}

namespace {

class Stream;

// Owns the state machine and the live streams; every entry point locks mu_.
class Core {
 public:
  explicit Core(RendezvousState::Config config)
      : state_(config), store_(config.fixed_master_port) {
    event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    timer_ = std::thread([this] { TimerLoop(); });
  }
  ~Core() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    timer_.join();
    if (event_fd_ >= 0) close(event_fd_);
  }

  int event_fd() const { return event_fd_; }
  std::optional<RendezvousServer::Event> NextEvent() {
    std::lock_guard<std::mutex> l(mu_);
    if (events_.empty()) {
      uint64_t v;
      while (read(event_fd_, &v, sizeof v) > 0) {
      }
      return std::nullopt;
    }
    RendezvousServer::Event e = std::move(events_.front());
    events_.pop_front();
    return e;
  }

  RendezvousState::NodeId Register(Stream* s) {
    std::lock_guard<std::mutex> l(mu_);
    RendezvousState::NodeId id = ++next_id_;
    streams_[id] = s;
    return id;
  }
  void Unregister(RendezvousState::NodeId id) {
    std::lock_guard<std::mutex> l(mu_);
    streams_.erase(id);
  }
  void Handle(RendezvousState::NodeId id, const v1::AgentMessage& m, const std::string& peer);
  void Lost(RendezvousState::NodeId id);

 private:
  void Dispatch(RendezvousState::Outbox out);  // mu_ held
  void WakeTimerIfEarlier();                   // mu_ held
  void TimerLoop();

  std::mutex mu_;
  std::condition_variable cv_;
  RendezvousState state_;
  RoundStore store_;
  std::map<RendezvousState::NodeId, Stream*> streams_;
  std::deque<RendezvousServer::Event> events_;
  bool finish_reported_ = false;
  int event_fd_ = -1;
  RendezvousState::NodeId next_id_ = 0;
  bool stop_ = false;
  std::optional<TimePoint> timer_waits_for_;  // the timer thread's deadline
  std::thread timer_;
};

class Stream : public grpc::ServerBidiReactor<v1::AgentMessage, v1::ServerMessage> {
 public:
  Stream(Core* core, grpc::CallbackServerContext* ctx)
      : core_(core), peer_(PeerHost(ctx->peer())) {
    id_ = core_->Register(this);
    StartRead(&in_);
  }

  // Called with the core's lock held; takes only this stream's lock.
  void Enqueue(v1::ServerMessage m, bool close_after) {
    std::lock_guard<std::mutex> l(mu_);
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
    if (in_.has_heartbeat()) {
      v1::ServerMessage ack;
      ack.mutable_heartbeat();
      Enqueue(std::move(ack), false);
    }
    core_->Handle(id_, in_, peer_);
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> l(mu_);
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
      std::lock_guard<std::mutex> l(mu_);
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
  RendezvousState::NodeId id_ = 0;
  v1::AgentMessage in_;
  std::mutex mu_;
  std::deque<v1::ServerMessage> out_;
  bool writing_ = false;
  bool close_after_writes_ = false;
  bool finished_ = false;
};

void Core::Handle(RendezvousState::NodeId id, const v1::AgentMessage& m, const std::string& peer) {
  std::lock_guard<std::mutex> l(mu_);
  const TimePoint now = Clock::now();
  switch (m.kind_case()) {
    case v1::AgentMessage::kHello: {
      const std::string addr = m.hello().addr().empty() ? peer : m.hello().addr();
      Dispatch(state_.OnHello(id, m.hello(), addr, now));
      break;
    }
    case v1::AgentMessage::kJoin:
      Dispatch(state_.OnJoin(id, m.join().free_port(), now));
      break;
    case v1::AgentMessage::kSucceeded:
      Dispatch(state_.OnSucceeded(id, m.succeeded().round(), now));
      break;
    case v1::AgentMessage::kFailed:
      Dispatch(state_.OnFailed(id, m.failed().round(), m.failed().failure(), now));
      break;
    case v1::AgentMessage::kHeartbeat:
      Dispatch(state_.OnHeartbeat(id, now));
      break;
    case v1::AgentMessage::KIND_NOT_SET:
      break;
  }
  WakeTimerIfEarlier();
}

void Core::Lost(RendezvousState::NodeId id) {
  std::lock_guard<std::mutex> l(mu_);
  Dispatch(state_.OnLost(id, Clock::now()));
  WakeTimerIfEarlier();
}

void Core::WakeTimerIfEarlier() {
  // Most messages (heartbeats) only move deadlines later: the timer thread
  // needs waking only when something is due before what it waits for.
  std::optional<TimePoint> next = state_.NextDeadline();
  if (next && (!timer_waits_for_ || *next < *timer_waits_for_)) cv_.notify_one();
}

void Core::Dispatch(RendezvousState::Outbox out) {
  if (absl::Status s = store_.Apply(&out); !s.ok()) {
    // Without its store the round cannot run: end the job for everyone.
    for (auto& o : out) {
      o.msg.Clear();
      o.msg.mutable_finish()->set_exit_code(1);
      o.msg.mutable_finish()->set_message(absl::StrCat("cannot start the c10d store: ", s.message()));
    }
  }
  bool wake = false;
  for (std::string& host : state_.TakeLostHosts()) {
    events_.push_back({RendezvousServer::Event::kNodeLost, std::move(host), {}});
    wake = true;
  }
  if (state_.finished() && !finish_reported_) {
    finish_reported_ = true;
    events_.push_back({RendezvousServer::Event::kFinished, "", state_.finish()});
    wake = true;
  }
  if (wake) {
    uint64_t one = 1;
    ssize_t r = write(event_fd_, &one, sizeof one);
    (void)r;
  }
  for (auto& o : out) {
    auto it = streams_.find(o.node);
    if (it == streams_.end()) continue;
    const bool reject = o.msg.has_reject();
    it->second->Enqueue(std::move(o.msg), reject);
  }
}

void Core::TimerLoop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    std::optional<TimePoint> next = state_.NextDeadline();
    timer_waits_for_ = next;
    if (next) {
      cv_.wait_until(l, *next);
    } else {
      cv_.wait(l);
    }
    timer_waits_for_.reset();
    if (stop_) break;
    const TimePoint now = Clock::now();
    if (next && now >= *next) Dispatch(state_.OnTick(now));
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

class ServerImpl : public RendezvousServer {
 public:
  explicit ServerImpl(RendezvousState::Config config)
      : core_(std::make_unique<Core>(std::move(config))), service_(core_.get()) {}
  ~ServerImpl() override { Shutdown(Duration::zero()); }

  absl::Status Listen(const std::string& addr) {
    grpc::ServerBuilder b;
    b.AddListeningPort(addr, grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(&service_);
    // Agents' transport keepalive pings are welcome at any rate.
    b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 200);
    b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
    b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    server_ = b.BuildAndStart();
    if (!server_ || port_ == 0) {
      return absl::UnavailableError(absl::StrCat(
          "cannot listen on ", addr,
          " (the port is in use, or the address is not on this host); pick another "
          "--rdzv-endpoint port"));
    }
    return absl::OkStatus();
  }
  int port() const override { return port_; }
  int event_fd() const override { return core_->event_fd(); }
  std::optional<Event> NextEvent() override { return core_->NextEvent(); }
  void Shutdown(Duration grace) override {
    if (!server_) return;
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::duration_cast<std::chrono::system_clock::duration>(grace));
    server_.reset();
  }

 private:
  std::unique_ptr<Core> core_;
  Service service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(
    const std::string& listen_addr, RendezvousState::Config config) {
  // One stream per agent and one or two store connections per worker: a large
  // job needs more descriptors than the usual soft limit of 1024.
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  auto s = std::make_unique<ServerImpl>(std::move(config));
  if (absl::Status st = s->Listen(listen_addr); !st.ok()) return st;
  return std::unique_ptr<RendezvousServer>(std::move(s));
}

}  // namespace drun
