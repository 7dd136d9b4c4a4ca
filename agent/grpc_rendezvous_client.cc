#include "agent/grpc_rendezvous_client.h"

#include <errno.h>
#include <grpcpp/create_channel_posix.h>
#include <grpcpp/grpcpp.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "drun/v1/rendezvous.grpc.pb.h"
#include "rendezvous/base/endpoint.h"
#include "rendezvous/base/mutex.h"
#include "rendezvous/base/tls_relay.h"
#include "rendezvous/base/unique_fd.h"
#include "rendezvous/base/wake_fd.h"
#include "rendezvous/join_auth.h"
#include "rendezvous/link_liveness.h"

namespace drun {

namespace {

// --rdzv-tls: why the TLS relay ended this agent's connection, when an error
// did (the relay's thread writes it before gRPC's end reads end-of-file).
struct BrokenLink {
  Mutex mu;
  std::string why ABSL_GUARDED_BY(mu);
  std::string Get() {
    MutexLock l(&mu);
    return why;
  }
};

class GrpcClient : public RendezvousClient {
 public:
  GrpcClient(const GrpcClientOptions& opt, std::shared_ptr<grpc::Channel> channel,
             std::shared_ptr<BrokenLink> link)
      : opt_(opt), stub_(v1::Rendezvous::NewStub(channel)), link_(std::move(link)), handshake_(opt.token) {
    stream_ = stub_->Attach(&ctx_);
    last_rx_ = Clock::now();
    seen_ = last_rx_;
    reader_ = std::thread([this] { ReadLoop(); });
  }

  ~GrpcClient() override {
    {
      MutexLock l(&mu_);
      closing_ = true;
    }
    ctx_.TryCancel();
    reader_.join();
  }

  void Send(const v1::AgentMessage& msg, TimePoint now) override {
    if (msg.has_heartbeat()) next_heartbeat_ = now + heartbeat();
    MutexLock l(&write_mu_);
    if (stream_done_) return;
    // With a token, a Hello waits for the Challenge it must answer, and
    // whatever follows it waits behind it.
    if (!opt_.token.empty() && !challenged_) {
      held_.push_back(msg);
      return;
    }
    WriteLocked(msg);
  }

  std::optional<v1::ServerMessage> Receive() override { return inbox_.Take(); }

  int wakeup_fd() const override { return inbox_.fd(); }

  void OnTick(TimePoint now) override {
    {
      MutexLock l(&mu_);
      // A heartbeat tick that comes late means this agent did not run (CPU
      // starvation, a stopped host): the server's words of that time may be
      // waiting unread, so that time is nobody's silence.
      if (now >= next_heartbeat_ && now - next_heartbeat_ > kStallTolerance) {
        stalled_ += now - next_heartbeat_ - kStallTolerance;
      }
      if (!lost_ && !heard_ && opt_.first_word > Duration::zero() &&
          now - stalled_ - seen_ > opt_.first_word) {
        NotDrunLocked(absl::StrCat("it accepted the connection but said nothing in ",
                                   std::chrono::duration<double>(opt_.first_word).count(), " s"));
      }
      if (!lost_ && silence_ > Duration::zero() && now - stalled_ - seen_ > silence_) {
        LoseLocked(absl::StrCat("no word from it for ",
                                std::chrono::duration_cast<std::chrono::milliseconds>(now - last_rx_)
                                    .count(),
                                " ms (link down or host frozen)"));
      }
    }
    if (now >= next_heartbeat_) {
      // Stamped with this agent's clock: the server tells its own backlog
      // from the stamps (rendezvous_state.h).
      v1::AgentMessage hb;
      hb.mutable_heartbeat()->set_sent_us(
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count());
      Send(hb, now);
    }
  }

  std::optional<TimePoint> NextDeadline() const override {
    MutexLock l(&mu_);
    if (lost_) return std::nullopt;
    TimePoint deadline = next_heartbeat_;
    if (!heard_ && opt_.first_word > Duration::zero()) {
      deadline = std::min(deadline, seen_ + stalled_ + opt_.first_word + std::chrono::milliseconds(1));
    }
    if (silence_ <= Duration::zero()) return deadline;
    return std::min(deadline, seen_ + stalled_ + silence_ + std::chrono::milliseconds(1));
  }

  bool relays_stacks() const override { return true; }
  bool connected() const override {
    MutexLock l(&mu_);
    return !lost_;
  }
  std::string server_host() const override {
    auto ep = ParseEndpoint(opt_.target, 0);
    return ep.ok() ? ep->host : opt_.target;
  }

  std::string Describe() const override {
    return absl::StrCat("rendezvous server at ", opt_.target);
  }

 private:
  void WriteLocked(const v1::AgentMessage& msg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_) {
    if (!msg.has_hello() || opt_.token.empty()) {
      stream_->Write(msg);  // a failure: the reader will see the break
      return;
    }
    v1::AgentMessage proven = msg;
    {
      MutexLock l(&auth_mu_);
      handshake_.Answer(proven.mutable_hello());
    }
    stream_->Write(proven);
  }

  // Reader thread: the server's Challenge came; the held messages go now.
  void OnChallenge(const v1::Challenge& c) {
    MutexLock l(&write_mu_);
    if (challenged_) return;  // a second one is ignored
    {
      MutexLock a(&auth_mu_);
      handshake_.OnChallenge(c);
    }
    challenged_ = true;
    for (const v1::AgentMessage& m : held_) WriteLocked(m);
    held_.clear();
  }

  // Reader thread: true when `m` is for the agent (a sealed spec opened).
  bool Admit(v1::ServerMessage* m) {
    if (m->has_challenge()) OnChallenge(m->challenge());
    absl::Status st;
    {
      // Not write_mu_: a blocking write must not hold up what the server says.
      MutexLock l(&auth_mu_);
      st = handshake_.Check(m);
    }
    if (st.ok() && m->has_pace()) TakePace(m->pace());
    if (st.ok()) return !m->has_heartbeat() && !m->has_pace();
    if (!absl::IsAlreadyExists(st)) {
      MutexLock l(&mu_);
      refused_ = true;
      LoseLocked(std::string(st.message()));
    }
    return false;
  }

  // Reader thread: the server's pace for this job (v1::Pace) replaces the
  // one this agent started with. The host's own agent keeps bearing any
  // silence of its in-process server (silence zero).
  void TakePace(const v1::Pace& p) {
    if (p.heartbeat_ms() <= 0 || p.silence_ms() <= 0) return;
    MutexLock l(&mu_);
    heartbeat_ = std::chrono::milliseconds(p.heartbeat_ms());
    if (silence_ > Duration::zero()) silence_ = std::chrono::milliseconds(p.silence_ms());
  }

  Duration heartbeat() const {
    MutexLock l(&mu_);
    return heartbeat_;
  }

  void ReadLoop() {
    v1::ServerMessage m;
    while (stream_->Read(&m)) {
      {
        MutexLock l(&mu_);
        last_rx_ = Clock::now();
        seen_ = last_rx_ - stalled_;
        heard_ = true;
        if (refused_) continue;  // nothing from a refused server reaches the agent
      }
      if (!Admit(&m)) continue;
      inbox_.Post(m);
    }
    grpc::Status status;
    {
      MutexLock l(&write_mu_);
      status = stream_->Finish();
      stream_done_ = true;
    }
    MutexLock l(&mu_);
    if (closing_) return;
    if (!heard_ && !opt_.tls) {
      // Every stream opens with the server's Challenge: a server that said
      // nothing at all closed the connection unread.
      NotDrunLocked("it closed the connection without a word (a drun rendezvous started with --rdzv-tls "
                    "does that to agents without it: check --rdzv-tls)");
      return;
    }
    const std::string tls_why = link_ ? link_->Get() : "";
    LoseLocked(status.ok() ? "it closed the stream"
                           : absl::StrCat("the connection broke (",
                                          tls_why.empty() ? status.error_message() : "TLS: " + tls_why, ")"));
  }

  void LoseLocked(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    EndLocked(absl::StrCat("lost the ", Describe(), ": ", why));
  }

  // What answers at the endpoint never spoke as a drun rendezvous.
  void NotDrunLocked(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    EndLocked(absl::StrCat("what answers at ", opt_.target, " is not a drun rendezvous: ", why,
                           "; if another program holds that port, pick another --rdzv-endpoint port"));
  }

  void EndLocked(const std::string& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (lost_) return;
    lost_ = true;
    v1::ServerMessage m;
    m.mutable_finish()->set_exit_code(1);
    m.mutable_finish()->set_message(message);
    inbox_.Post(std::move(m));
  }

  GrpcClientOptions opt_;
  std::unique_ptr<v1::Rendezvous::Stub> stub_;
  std::shared_ptr<BrokenLink> link_;  // null without TLS
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::ServerMessage>> stream_;
  std::thread reader_;
  // From the reader thread to the agent's loop (the last one, once lost_, a Finish).
  Mailbox<v1::ServerMessage> inbox_;
  // mu_: what the reader thread and the agent's loop share.
  mutable Mutex mu_;
  // write_mu_: the stream's write side (gRPC allows one writer at a time).
  Mutex write_mu_;
  static constexpr Duration kStallTolerance = std::chrono::milliseconds(50);
  TimePoint last_rx_ ABSL_GUARDED_BY(mu_);
  TimePoint seen_ ABSL_GUARDED_BY(mu_);          // last_rx_ on the stall-free clock
  Duration stalled_ ABSL_GUARDED_BY(mu_) = Duration::zero();  // time found not running
  TimePoint next_heartbeat_ = Clock::now();     // the agent's loop thread only
  // opt_'s, until the server's Pace.
  Duration heartbeat_ ABSL_GUARDED_BY(mu_) = opt_.heartbeat;
  Duration silence_ ABSL_GUARDED_BY(mu_) = opt_.silence;
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool refused_ ABSL_GUARDED_BY(mu_) = false;  // it failed the job token's handshake
  bool heard_ ABSL_GUARDED_BY(mu_) = false;    // anything came from the server
  bool stream_done_ ABSL_GUARDED_BY(write_mu_) = false;
  bool challenged_ ABSL_GUARDED_BY(write_mu_) = false;  // the Challenge came: nothing is held
  std::vector<v1::AgentMessage> held_ ABSL_GUARDED_BY(write_mu_);  // until the Challenge
  // auth_mu_: the job token's handshake (taken inside write_mu_, never the reverse).
  Mutex auth_mu_;
  AgentHandshake handshake_ ABSL_GUARDED_BY(auth_mu_);
};

}  // namespace

namespace {

// A pending SIGINT/TERM/HUP/QUIT (the agent's signals are blocked: they reach
// its signalfd later) ends the wait for the server: Ctrl-C must work while
// the server is not up yet.
int TakeStopSignal() {
  sigset_t stop, pending;
  sigemptyset(&stop);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&stop, sig);
  if (sigpending(&pending) != 0) return 0;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    if (sigismember(&pending, sig)) {
      timespec zero{0, 0};
      sigtimedwait(&stop, nullptr, &zero);  // consume it: we act on it here
      return sig;
    }
  }
  return 0;
}

// "host:port" / "[v6]:port" -> address to dial, resolved again on every
// attempt (the host may not be in DNS yet).
bool Resolve(const std::string& target, sockaddr_storage* out, socklen_t* len) {
  auto ep = ParseEndpoint(target, 0);
  if (!ep.ok() || ep->port == 0) return false;
  auto addr = ResolveSockAddr(*ep);
  if (!addr.ok()) return false;
  *out = addr->storage;
  *len = addr->len;
  return true;
}

}  // namespace

namespace {

absl::Status Stopped(int sig, int* stop_signal) {
  *stop_signal = sig;
  return absl::CancelledError(absl::StrCat("stopped by signal ", sig, " while waiting for the rendezvous server"));
}

// Completes a non-blocking connect() to `addr`: true once connected. A SYN
// into a cut link may take long: waited for in slices, so a stop signal
// still ends the wait.
absl::StatusOr<bool> Connected(int fd, const sockaddr_storage& addr, socklen_t len, TimePoint deadline,
                               int* stop_signal) {
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), len) == 0) return true;
  if (errno != EINPROGRESS) return false;
  for (;;) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, PollTimeoutMs(deadline, Clock::now(), 100)) > 0) {
      int err = 0;
      socklen_t el = sizeof err;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
      return err == 0;
    }
    if (int sig = TakeStopSignal()) return Stopped(sig, stop_signal);
    if (Clock::now() >= deadline) return false;
  }
}

// A TCP connection to the server, dialled until it answers, the deadline, or
// a stop signal. drun dials the server itself, so the socket carries the
// link-liveness options (link_liveness.h) before gRPC runs HTTP/2 over it.
absl::StatusOr<UniqueFd> Dial(const GrpcClientOptions& opt, TimePoint deadline, int* stop_signal) {
  // Refused while the host starts: dial again after 5 ms, doubling up to
  // 100 ms (jobs start all nodes at once, and a refused loopback dial is cheap).
  auto slice = std::chrono::milliseconds(5);
  for (;;) {
    const TimePoint attempt = Clock::now();
    if (attempt >= deadline) break;
    sockaddr_storage addr{};
    socklen_t len = 0;
    if (Resolve(opt.target, &addr, &len)) {
      UniqueFd s(socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      if (s.valid()) {
        SetLinkTimeout(s.get(), std::chrono::duration_cast<std::chrono::milliseconds>(opt.link_timeout));
        auto ok = Connected(s.get(), addr, len, deadline, stop_signal);
        if (!ok.ok()) return ok.status();
        if (*ok) return s;
      }
    }
    if (int sig = TakeStopSignal()) return Stopped(sig, stop_signal);
    // Refused (the host is not up yet): try again once the slice is over.
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(std::min(deadline, attempt + slice) - Clock::now());
    if (wait.count() > 0) poll(nullptr, 0, static_cast<int>(wait.count()));
    slice = std::min(2 * slice, std::chrono::milliseconds(100));
  }
  return absl::UnavailableError(absl::StrCat(
      "cannot reach the rendezvous server at ", opt.target, " within ",
      std::chrono::duration_cast<std::chrono::seconds>(opt.connect_timeout).count(),
      " s: start drun on the node that hosts it, or check --rdzv-endpoint"));
}

// One relay thread for every TLS connection of this process (tls_relay.h).
absl::StatusOr<TlsRelay*> ProcessRelay() {
  static Mutex mu;
  static std::unique_ptr<TlsRelay> relay;
  MutexLock l(&mu);
  if (!relay) {
    auto r = TlsRelay::Start(TlsRelay::Options());
    if (!r.ok()) return r.status();
    relay = *std::move(r);
  }
  return relay.get();
}

// --rdzv-tls: the handshake runs here, within the connect deadline, so a
// refusal is one clear line; the connection then goes through the relay and
// gRPC gets its plain end.
absl::StatusOr<UniqueFd> StartTls(const GrpcClientOptions& opt, UniqueFd tcp, TimePoint deadline,
                                  int* stop_signal, std::shared_ptr<BrokenLink> link) {
  TlsFailure failure = TlsFailure::kOther;
  auto stop = [stop_signal] { return (*stop_signal = TakeStopSignal()) != 0; };
  auto ssl = TlsConnect(*opt.tls, tcp.get(), deadline, stop, &failure);
  if (!ssl.ok() && *stop_signal != 0) return Stopped(*stop_signal, stop_signal);
  if (!ssl.ok()) {
    const char* hint = failure == TlsFailure::kPeerClosed
                           ? " (a rendezvous started without --rdzv-tls closes agents that use it)"
                           : "";
    return absl::UnavailableError(absl::StrCat("TLS handshake with ", opt.target, " failed: ",
                                               ssl.status().message(), hint, "; check --rdzv-tls"));
  }
  auto relay = ProcessRelay();
  if (!relay.ok()) return relay.status();
  return (*relay)->Adopt(std::move(tcp), *std::move(ssl), [link](const std::string& why) {
    MutexLock l(&link->mu);
    link->why = why;
  });
}

}  // namespace

absl::StatusOr<std::shared_ptr<const TlsContext>> LoadClientTls(const v1::JobSpec& spec) {
  if (!spec.has_tls()) return std::shared_ptr<const TlsContext>();
  return TlsContext::Load(TlsContext::Side::kClient, spec.tls().cert(), spec.tls().key(), spec.tls().ca());
}

absl::StatusOr<std::unique_ptr<RendezvousClient>> ConnectRendezvous(const GrpcClientOptions& opt,
                                                                     int* stop_signal) {
  *stop_signal = 0;
  const auto deadline = Clock::now() + opt.connect_timeout;
  auto fd = Dial(opt, deadline, stop_signal);
  if (!fd.ok()) return fd.status();
  std::shared_ptr<BrokenLink> link;
  if (opt.tls) {
    link = std::make_shared<BrokenLink>();
    fd = StartTls(opt, *std::move(fd), deadline, stop_signal, link);
    if (!fd.ok()) return fd.status();
  }
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto channel = grpc::CreateCustomInsecureChannelFromFd(opt.target, fd->release(), args);
  return std::unique_ptr<RendezvousClient>(new GrpcClient(opt, std::move(channel), std::move(link)));
}

}  // namespace drun
