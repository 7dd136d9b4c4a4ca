#include "agent/grpc_rendezvous_client.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <deque>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "drun/v1/rendezvous.grpc.pb.h"

namespace drun {

namespace {

class GrpcClient : public RendezvousClient {
 public:
  GrpcClient(const GrpcClientOptions& opt, std::shared_ptr<grpc::Channel> channel)
      : opt_(opt), stub_(v1::Rendezvous::NewStub(channel)) {
    event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    stream_ = stub_->Attach(&ctx_);
    last_rx_ = Clock::now();
    seen_ = last_rx_;
    reader_ = std::thread([this] { ReadLoop(); });
  }

  ~GrpcClient() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      closing_ = true;
    }
    ctx_.TryCancel();
    reader_.join();
    if (event_fd_ >= 0) close(event_fd_);
  }

  void Send(const v1::AgentMessage& msg, TimePoint now) override {
    std::lock_guard<std::mutex> l(write_mu_);
    if (stream_done_) return;
    if (!stream_->Write(msg)) return;  // the reader will see the break
    if (msg.has_heartbeat()) next_heartbeat_ = now + opt_.heartbeat;
  }

  std::optional<v1::ServerMessage> Receive() override {
    std::lock_guard<std::mutex> l(mu_);
    if (inbox_.empty()) {
      uint64_t v;
      while (read(event_fd_, &v, sizeof v) > 0) {
      }
      return std::nullopt;
    }
    v1::ServerMessage m = std::move(inbox_.front());
    inbox_.pop_front();
    return m;
  }

  int wakeup_fd() const override { return event_fd_; }

  void OnTick(TimePoint now) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      // A heartbeat tick that comes late means this agent did not run (CPU
      // starvation, a stopped host): the server's words of that time may be
      // waiting unread, so that time is nobody's silence.
      if (now >= next_heartbeat_ && now - next_heartbeat_ > kStallTolerance) {
        stalled_ += now - next_heartbeat_ - kStallTolerance;
      }
      if (!lost_ && opt_.silence > Duration::zero() && now - stalled_ - seen_ > opt_.silence) {
        LoseLocked(absl::StrCat("no word from it for ",
                                std::chrono::duration_cast<std::chrono::milliseconds>(now - last_rx_)
                                    .count(),
                                " ms (link down or host frozen)"));
      }
    }
    if (now >= next_heartbeat_) {
      v1::AgentMessage hb;
      hb.mutable_heartbeat();
      Send(hb, now);
      next_heartbeat_ = now + opt_.heartbeat;
    }
  }

  std::optional<TimePoint> NextDeadline() const override {
    std::lock_guard<std::mutex> l(mu_);
    if (lost_) return std::nullopt;
    if (opt_.silence <= Duration::zero()) return next_heartbeat_;
    return std::min(next_heartbeat_,
                    seen_ + stalled_ + opt_.silence + std::chrono::milliseconds(1));
  }

  std::string server_host() const override {
    const std::string& t = opt_.target;
    if (!t.empty() && t[0] == '[') return t.substr(1, t.find(']') - 1);
    return t.substr(0, t.rfind(':'));
  }

  std::string Describe() const override {
    return absl::StrCat("rendezvous server at ", opt_.target);
  }

 private:
  void ReadLoop() {
    v1::ServerMessage m;
    while (stream_->Read(&m)) {
      std::lock_guard<std::mutex> l(mu_);
      last_rx_ = Clock::now();
      seen_ = last_rx_ - stalled_;
      if (m.has_heartbeat()) continue;
      inbox_.push_back(m);
      Wake();
    }
    grpc::Status status;
    {
      std::lock_guard<std::mutex> l(write_mu_);
      status = stream_->Finish();
      stream_done_ = true;
    }
    std::lock_guard<std::mutex> l(mu_);
    if (!closing_) {
      LoseLocked(status.ok() ? "it closed the stream"
                             : absl::StrCat("the connection broke (", status.error_message(), ")"));
    }
  }

  void LoseLocked(const std::string& why) {
    if (lost_) return;
    lost_ = true;
    v1::ServerMessage m;
    m.mutable_finish()->set_exit_code(1);
    m.mutable_finish()->set_message(absl::StrCat("lost the ", Describe(), ": ", why));
    inbox_.push_back(std::move(m));
    Wake();
  }

  void Wake() {
    uint64_t one = 1;
    ssize_t r = write(event_fd_, &one, sizeof one);
    (void)r;
  }

  GrpcClientOptions opt_;
  std::unique_ptr<v1::Rendezvous::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::ServerMessage>> stream_;
  std::thread reader_;
  int event_fd_ = -1;
  mutable std::mutex mu_;
  std::mutex write_mu_;
  std::deque<v1::ServerMessage> inbox_;
  static constexpr Duration kStallTolerance = std::chrono::milliseconds(50);
  TimePoint last_rx_;
  TimePoint seen_;                             // last_rx_ on the stall-free clock
  Duration stalled_ = Duration::zero();        // time this agent was found not running
  TimePoint next_heartbeat_ = Clock::now();
  bool lost_ = false;
  bool closing_ = false;
  bool stream_done_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RendezvousClient>> ConnectRendezvous(const GrpcClientOptions& opt) {
  grpc::ChannelArguments args;
  // Keep reconnect attempts frequent while we wait for the host to come up.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  auto channel = grpc::CreateCustomChannel(opt.target, grpc::InsecureChannelCredentials(), args);
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::duration_cast<std::chrono::system_clock::duration>(
                            opt.connect_timeout);
  // The agent's signals are blocked (they arrive through its signalfd later),
  // so wait in slices and look for a pending stop signal between them:
  // Ctrl-C must work while the server is not up yet.
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&stop, sig);
  bool connected = false;
  while (!connected) {
    const auto now = std::chrono::system_clock::now();
    if (now >= deadline) break;
    connected = channel->WaitForConnected(std::min(deadline, now + std::chrono::milliseconds(100)));
    sigset_t pending;
    if (!connected && sigpending(&pending) == 0) {
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
        if (sigismember(&pending, sig)) {
          timespec zero{0, 0};
          sigtimedwait(&stop, nullptr, &zero);  // consume it: we act on it here
          return absl::CancelledError(absl::StrCat("stopped by signal ", sig,
                                                   " while waiting for the rendezvous server"));
        }
      }
    }
  }
  if (!connected) {
    return absl::UnavailableError(absl::StrCat(
        "cannot reach the rendezvous server at ", opt.target, " within ",
        std::chrono::duration_cast<std::chrono::seconds>(opt.connect_timeout).count(),
        " s: start drun on the node that hosts it, or check --rdzv-endpoint"));
  }
  return std::unique_ptr<RendezvousClient>(new GrpcClient(opt, std::move(channel)));
}

}  // namespace drun
