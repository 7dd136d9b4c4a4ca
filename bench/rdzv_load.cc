// Load client for bench/rendezvous_bench.py: N simulated agents on one
// rendezvous server, each one gRPC stream that speaks proto/drun/v1 like
// agent/grpc_rendezvous_client.cc does (Hello, Join, a Heartbeat at the pace
// the server's Pace gives, or every --heartbeat-ms when given, each stamped
// with the sender's clock; Succeeded once assigned). With --token, each stream runs
// the job token's handshake (rendezvous/join_auth.h) like the real client:
// it waits for the server's Challenge, answers with a proof, checks the
// server's Welcome and opens every sealed spec; a refused server counts as
// an error. With --tls CERT,KEY,CA, each connection is TLS with that client
// certificate, through one relay thread (rendezvous/base/tls_relay.h), as
// the real agent's is.
//
//   drun_rdzv_load --target 127.0.0.1:PORT --streams 10000 [--channels 8]
//                  [--run-id ID] [--token T] [--heartbeat-ms MS]
//                  [--timeout-s 120] [--tls CERT,KEY,CA] [--lose kill|stuck]
//
// Prints key=value lines on stdout (times in seconds, from the first stream's
// start): last_join_s is when the last Join was handed to the transport,
// last_assignment_s when the last Assignment arrived, join_to_assignment_s
// their difference (the round's close as every agent sees it). Each stream
// then answers its Assignment with Succeeded, as if its workers had exited 0,
// and waits for Finish, so the job ends cleanly (a stream closed while the
// round runs would be a lost node, and stop the round for everyone).
// Exit code 0 when every stream got what it waited for, 1 otherwise.
#include <grpcpp/create_channel_posix.h>
#include <grpcpp/grpcpp.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "drun/v1/rendezvous.grpc.pb.h"
#include "absl/strings/str_split.h"
#include "rendezvous/base/endpoint.h"
#include "rendezvous/base/mutex.h"
#include "rendezvous/base/tls_relay.h"
#include "rendezvous/join_auth.h"

namespace {

using Clock = std::chrono::steady_clock;
using drun::v1::AgentMessage;
using drun::v1::ServerMessage;

struct Options {
  std::string target = "127.0.0.1:29400";
  int streams = 1000;
  int channels = 8;
  std::string run_id = "bench";
  std::string token;
  int heartbeat_ms = 0;  // 0: the server's Pace
  double timeout_s = 120;
  std::string tls;  // CERT,KEY,CA
  // --lose kill|stuck: no stream reports Succeeded; once every stream has its
  // Assignment, stream 0 is lost: its stream cancelled (as a killed agent's
  // connection closes) or silent (heartbeats stop: a stuck process). The
  // figure is lose -> first Stop at another stream; the run ends once every
  // other stream has its Stop.
  std::string lose;
};

Clock::time_point g_t0;
double Since(Clock::time_point t) { return std::chrono::duration<double>(t - g_t0).count(); }

// Shared tallies; every field is written under mu.
struct Tally {
  drun::Mutex mu;
  drun::CondVar cv;
  int done = 0;           // streams whose OnDone ran
  int assigned = 0;
  int finished = 0;       // Finish received
  int rejected = 0;
  int refused = 0;        // the server failed the token's handshake
  int waiting = 0;        // Waiting replies received
  int broken = 0;         // stream ended before it got what it waited for
  int stops = 0;
  double lost_at = -1, first_stop = -1, last_stop = 0;
  std::function<void()> all_assigned;  // --lose: called once every stream is assigned
  double last_join = 0, first_assignment = -1, last_assignment = 0;
  double last_succeeded = 0, last_finish = 0;
  std::vector<double> hb_rtt;  // heartbeat round trips, seconds
  int64_t pace_ms = 0, silence_ms = 0;  // the server's Pace, as received
  std::string first_error;
};

class SimAgent : public grpc::ClientBidiReactor<AgentMessage, ServerMessage> {
 public:
  SimAgent(int index, const Options& opt, Tally* tally)
      : index_(index), opt_(opt), tally_(tally), handshake_(opt.token) {}

  void Start(drun::v1::Rendezvous::Stub* stub) {
    stub->async()->Attach(&ctx_, this);
    // Without a token Hello goes at once; with one it answers the Challenge.
    if (!handshake_.has_token()) SayHello();
    StartRead(&in_);
    StartCall();
    started_.store(true);
  }

  void SayHello() {
    AgentMessage hello;
    auto* h = hello.mutable_hello();
    h->set_run_id(opt_.run_id);
    h->set_hostname("sim" + std::to_string(index_));
    h->set_local_world_size(1);
    h->set_requested_node_rank(-1);
    h->set_version("0.1.0");
    h->set_addr("127.0.0.1");
    handshake_.Answer(h);
    Enqueue(std::move(hello));
    AgentMessage join;
    join.mutable_join()->set_free_port(0);
    Enqueue(std::move(join));
  }

  // Called by the heartbeat thread.
  void Heartbeat() {
    if (!started_.load() || closed_.load() || muted_.load()) return;
    AgentMessage hb;
    hb.mutable_heartbeat()->set_sent_us(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count());
    {
      drun::MutexLock l(&mu_);
      hb_sent_.push_back(Clock::now());
    }
    Enqueue(std::move(hb));
  }

  void Cancel() { ctx_.TryCancel(); }
  void Mute() { muted_.store(true); }

  void OnWriteDone(bool ok) override {
    drun::MutexLock l(&mu_);
    const AgentMessage& m = out_.front();
    if (ok && m.has_join()) {
      drun::MutexLock t(&tally_->mu);
      tally_->last_join = std::max(tally_->last_join, Since(Clock::now()));
    } else if (ok && m.has_succeeded()) {
      drun::MutexLock t(&tally_->mu);
      tally_->last_succeeded = std::max(tally_->last_succeeded, Since(Clock::now()));
    }
    out_.pop_front();
    writing_ = false;
    if (!ok) return;  // the read side sees the break
    PumpLocked();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    const Clock::time_point now = Clock::now();
    if (in_.has_challenge() && handshake_.has_token() && !handshake_.challenged()) {
      handshake_.OnChallenge(in_.challenge());
      SayHello();
    }
    const absl::Status st = handshake_.Check(&in_);  // reads come one at a time
    if (!st.ok()) {
      if (!absl::IsAlreadyExists(st)) {
        drun::MutexLock t(&tally_->mu);
        ++tally_->refused;
        if (tally_->first_error.empty()) tally_->first_error = "server refused: " + std::string(st.message());
      }
      StartRead(&in_);
      return;
    }
    switch (in_.kind_case()) {
      case ServerMessage::kHeartbeat: {
        double rtt = -1;
        {
          drun::MutexLock l(&mu_);
          // One reply answers every heartbeat before it (the server sheds
          // replies while it is behind on a stream): timed from the oldest.
          if (!hb_sent_.empty()) {
            rtt = std::chrono::duration<double>(now - hb_sent_.front()).count();
            hb_sent_.clear();
          }
        }
        if (rtt >= 0) {
          drun::MutexLock t(&tally_->mu);
          tally_->hb_rtt.push_back(rtt);
        }
        break;
      }
      case ServerMessage::kPace: {
        drun::MutexLock t(&tally_->mu);
        tally_->pace_ms = in_.pace().heartbeat_ms();
        tally_->silence_ms = in_.pace().silence_ms();
        break;
      }
      case ServerMessage::kWaiting: {
        drun::MutexLock t(&tally_->mu);
        ++tally_->waiting;
        break;
      }
      case ServerMessage::kAssignment: {
        bool all = false;
        {
          drun::MutexLock t(&tally_->mu);
          ++tally_->assigned;
          const double s = Since(now);
          if (tally_->first_assignment < 0) tally_->first_assignment = s;
          tally_->last_assignment = std::max(tally_->last_assignment, s);
          all = tally_->assigned == opt_.streams;
        }
        if (!opt_.lose.empty()) {
          if (all) tally_->all_assigned();
          break;  // held: the round runs until the loss stops it
        }
        AgentMessage m;
        m.mutable_succeeded()->set_round(in_.assignment().round());
        Enqueue(std::move(m));
        break;
      }
      case ServerMessage::kFinish: {
        {
          drun::MutexLock t(&tally_->mu);
          ++tally_->finished;
          tally_->last_finish = std::max(tally_->last_finish, Since(now));
          if (in_.finish().exit_code() != 0 && tally_->first_error.empty()) {
            tally_->first_error = "finish: " + in_.finish().message();
          }
        }
        got_finish_ = true;
        CloseWrites();
        tally_->cv.SignalAll();
        break;
      }
      case ServerMessage::kReject: {
        drun::MutexLock t(&tally_->mu);
        ++tally_->rejected;
        if (tally_->first_error.empty()) tally_->first_error = "reject: " + in_.reject().message();
        break;
      }
      case ServerMessage::kStop: {
        drun::MutexLock t(&tally_->mu);
        ++tally_->stops;
        const double s = Since(now);
        if (tally_->first_stop < 0) tally_->first_stop = s;
        tally_->last_stop = std::max(tally_->last_stop, s);
        tally_->cv.SignalAll();
        break;
      }
      default:
        break;
    }
    StartRead(&in_);
  }

  void OnDone(const grpc::Status& s) override {
    closed_.store(true);
    const bool complete = got_finish_;
    {
      drun::MutexLock t(&tally_->mu);
      ++tally_->done;
      if (!complete) {
        ++tally_->broken;
        if (tally_->first_error.empty()) {
          tally_->first_error = "stream " + std::to_string(index_) + " ended early: " +
                                std::to_string(s.error_code()) + " " + s.error_message();
        }
      }
    }
    tally_->cv.SignalAll();
  }

 private:
  void Enqueue(AgentMessage m) {
    drun::MutexLock l(&mu_);
    if (half_closed_) return;
    out_.push_back(std::move(m));
    PumpLocked();
  }

  void CloseWrites() {
    drun::MutexLock l(&mu_);
    close_requested_ = true;
    PumpLocked();
  }

  // mu_ held. One write in flight at a time, then WritesDone once drained.
  void PumpLocked() {
    if (writing_ || half_closed_) return;
    if (!out_.empty()) {
      writing_ = true;
      StartWrite(&out_.front());
    } else if (close_requested_) {
      half_closed_ = true;
      closed_.store(true);  // no more heartbeats
      StartWritesDone();
    }
  }

  const int index_;
  const Options& opt_;
  Tally* tally_;
  grpc::ClientContext ctx_;
  ServerMessage in_;
  drun::AgentHandshake handshake_;  // the reactor's read side only
  drun::Mutex mu_;
  std::deque<AgentMessage> out_;
  std::deque<Clock::time_point> hb_sent_;
  bool writing_ = false;
  bool close_requested_ = false;
  bool half_closed_ = false;
  bool got_finish_ = false;
  std::atomic<bool> started_{false};
  std::atomic<bool> closed_{false};
  std::atomic<bool> muted_{false};
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

int Usage() {
  std::fprintf(stderr,
               "usage: drun_rdzv_load --target HOST:PORT --streams N [--channels C] [--run-id ID]\n"
               "                      [--token T] [--heartbeat-ms MS] [--timeout-s S]\n"
               "                      [--tls CERT,KEY,CA] [--lose kill|stuck]\n");
  return 2;
}

// A channel over one TLS connection, made like the agent's
// (agent/grpc_rendezvous_client.cc): drun dials, handshakes, and hands gRPC
// the relay's plain end.
std::shared_ptr<grpc::Channel> TlsChannel(const Options& opt, const drun::TlsContext& ctx,
                                          drun::TlsRelay* relay, const grpc::ChannelArguments& args) {
  auto ep = drun::ParseEndpoint(opt.target, 0);
  if (!ep.ok()) return nullptr;
  auto addr = drun::ResolveSockAddr(*ep);
  if (!addr.ok()) return nullptr;
  drun::UniqueFd fd(socket(addr->storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr->storage), addr->len) != 0) return nullptr;
  fcntl(fd.get(), F_SETFL, O_NONBLOCK);
  auto ssl = drun::TlsConnect(ctx, fd.get(), drun::Clock::now() + std::chrono::seconds(30), nullptr);
  if (!ssl.ok()) {
    std::fprintf(stderr, "drun_rdzv_load: TLS: %s\n", std::string(ssl.status().message()).c_str());
    return nullptr;
  }
  auto plain = relay->Adopt(std::move(fd), *std::move(ssl));
  if (!plain.ok()) return nullptr;
  return grpc::CreateCustomInsecureChannelFromFd(opt.target, plain->release(), args);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (!(v = next())) return Usage();
    if (a == "--target") opt.target = v;
    else if (a == "--streams") opt.streams = std::atoi(v);
    else if (a == "--channels") opt.channels = std::max(1, std::atoi(v));
    else if (a == "--run-id") opt.run_id = v;
    else if (a == "--token") opt.token = v;
    else if (a == "--heartbeat-ms") opt.heartbeat_ms = std::atoi(v);
    else if (a == "--timeout-s") opt.timeout_s = std::atof(v);
    else if (a == "--tls") opt.tls = v;
    else if (a == "--lose") opt.lose = v;
    else return Usage();
  }
  if (opt.streams < 2 && !opt.lose.empty()) return Usage();
  if (opt.streams < 1 || (!opt.lose.empty() && opt.lose != "kill" && opt.lose != "stuck")) return Usage();

  // One TCP connection per channel: a local subchannel pool keeps channels
  // with equal arguments from sharing one.
  std::shared_ptr<const drun::TlsContext> tls;
  std::unique_ptr<drun::TlsRelay> relay;
  if (!opt.tls.empty()) {
    std::vector<std::string> f = absl::StrSplit(opt.tls, ',');
    if (f.size() != 3) return Usage();
    auto ctx = drun::TlsContext::Load(drun::TlsContext::Side::kClient, f[0], f[1], f[2]);
    auto r = drun::TlsRelay::Start(drun::TlsRelay::Options());
    if (!ctx.ok() || !r.ok()) {
      std::fprintf(stderr, "drun_rdzv_load: %s\n", std::string(ctx.status().message()).c_str());
      return 2;
    }
    tls = *ctx;
    relay = std::move(*r);
  }
  std::vector<std::unique_ptr<drun::v1::Rendezvous::Stub>> stubs;
  for (int c = 0; c < opt.channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("drun.bench.channel", c);
    auto ch = tls ? TlsChannel(opt, *tls, relay.get(), args)
                  : grpc::CreateCustomChannel(opt.target, grpc::InsecureChannelCredentials(), args);
    // A channel from a descriptor is connected already (and is no "client
    // channel" that WaitForConnected may watch).
    if (!ch || (!tls && !ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(30)))) {
      std::fprintf(stderr, "drun_rdzv_load: cannot connect to %s\n", opt.target.c_str());
      return 1;
    }
    stubs.push_back(drun::v1::Rendezvous::NewStub(ch));
  }

  Tally tally;
  tally.hb_rtt.reserve(1 << 20);
  std::vector<std::unique_ptr<SimAgent>> agents;
  agents.reserve(opt.streams);
  for (int i = 0; i < opt.streams; ++i) agents.push_back(std::make_unique<SimAgent>(i, opt, &tally));

  tally.all_assigned = [&] {
    {
      drun::MutexLock l(&tally.mu);
      tally.lost_at = Since(Clock::now());
    }
    if (opt.lose == "kill") {
      agents[0]->Cancel();
    } else {
      agents[0]->Mute();
    }
  };
  std::atomic<bool> stop_heartbeats{false};
  std::atomic<int> started{0};
  // Heartbeats like the real agent's: each stream at the server's pace (or
  // every --heartbeat-ms), spread over 50 slots so the server sees a steady
  // rate, not bursts. None before the first Pace has come.
  auto interval_ms = [&]() -> int64_t {
    if (opt.heartbeat_ms > 0) return opt.heartbeat_ms;
    drun::MutexLock l(&tally.mu);
    return tally.pace_ms;
  };
  std::thread heart([&] {
    constexpr int kSlots = 50;
    auto next = Clock::now();
    for (int tick = 0; !stop_heartbeats.load(); ++tick) {
      const int64_t every = interval_ms();
      next += every > 0 ? std::chrono::microseconds(every * 1000 / kSlots) : std::chrono::microseconds(100000);
      std::this_thread::sleep_until(next);
      if (every <= 0) continue;
      const int n = started.load();
      for (int i = tick % kSlots; i < n; i += kSlots) agents[i]->Heartbeat();
    }
  });

  g_t0 = Clock::now();
  for (int i = 0; i < opt.streams; ++i) {
    agents[i]->Start(stubs[i % stubs.size()].get());
    started.store(i + 1);
  }
  const double started_s = Since(Clock::now());

  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(opt.timeout_s));
  bool timed_out = false;
  if (!opt.lose.empty()) {
    // Every other stream has its Stop: the loss was seen; the streams end here.
    bool seen = false;
    {
      drun::MutexLock l(&tally.mu);
      while (tally.stops < opt.streams - 1 && tally.cv.WaitUntil(&tally.mu, deadline)) {
      }
      seen = tally.stops >= opt.streams - 1;
    }
    for (int i = 1; i < opt.streams; ++i) agents[i]->Cancel();
    timed_out = !seen;
  }
  {
    drun::MutexLock l(&tally.mu);
    while (tally.done != opt.streams && tally.cv.WaitUntil(&tally.mu, deadline)) {
    }
    timed_out = timed_out || tally.done != opt.streams;
  }
  if (timed_out) {
    for (auto& a : agents) a->Cancel();
    drun::MutexLock l(&tally.mu);
    const auto bound = Clock::now() + std::chrono::seconds(30);
    while (tally.done != opt.streams && tally.cv.WaitUntil(&tally.mu, bound)) {
    }
  }
  stop_heartbeats.store(true);
  heart.join();

  drun::MutexLock l(&tally.mu);
  std::printf("streams=%d\nchannels=%d\nstarted_s=%.4f\nlast_join_s=%.4f\n", opt.streams,
              opt.channels, started_s, tally.last_join);
  std::printf("waiting=%d\nassigned=%d\nfirst_assignment_s=%.4f\nlast_assignment_s=%.4f\n",
              tally.waiting, tally.assigned, tally.first_assignment, tally.last_assignment);
  std::printf("join_to_assignment_s=%.4f\n", tally.last_assignment - tally.last_join);
  std::printf("finished=%d\nlast_succeeded_s=%.4f\nlast_finish_s=%.4f\n", tally.finished,
              tally.last_succeeded, tally.last_finish);
  std::printf("succeeded_to_finish_s=%.4f\n", tally.last_finish - tally.last_succeeded);
  std::printf("pace_ms=%lld\npace_silence_ms=%lld\n", static_cast<long long>(tally.pace_ms),
              static_cast<long long>(tally.silence_ms));
  std::printf("heartbeats=%zu\nhb_rtt_p50_s=%.4f\nhb_rtt_p99_s=%.4f\nhb_rtt_max_s=%.4f\n",
              tally.hb_rtt.size(), Percentile(tally.hb_rtt, 0.5), Percentile(tally.hb_rtt, 0.99),
              Percentile(tally.hb_rtt, 1.0));
  std::printf("rejected=%d\nrefused=%d\nbroken=%d\nstops=%d\ntimed_out=%d\n", tally.rejected,
              tally.refused, tally.broken, tally.stops, timed_out ? 1 : 0);
  if (!opt.lose.empty()) {
    std::printf("lost_at_s=%.4f\nfirst_stop_s=%.4f\nlast_stop_s=%.4f\nloss_to_stop_s=%.4f\n",
                tally.lost_at, tally.first_stop, tally.last_stop,
                tally.first_stop - tally.lost_at);
  }
  std::fflush(stdout);
  if (!tally.first_error.empty()) std::fprintf(stderr, "drun_rdzv_load: %s\n", tally.first_error.c_str());
  // --lose: the lost stream alone may be rejected (told it was dropped) or broken.
  const bool ok = opt.lose.empty()
                      ? !timed_out && tally.broken == 0 && tally.rejected == 0 && tally.refused == 0 &&
                            tally.assigned == opt.streams && tally.finished == opt.streams
                      : !timed_out && tally.rejected <= 1 && tally.refused == 0 &&
                            tally.stops >= opt.streams - 1;
  // After a timeout some reactors may still be live: skip destructors.
  std::fflush(stderr);
  _exit(ok ? 0 : 1);
}
