// One port (docs/architecture.md): a RendezvousServer whose configured master port is its own
// port serves the workers' c10d store there too. Real gRPC agents (drun's client) and real
// torch 1.13 TCPStore clients (tests/store/one_port_clients.py under /usr/bin/python3) share
// the port; silent and garbage connections do not get in anyone's way.
// Every wait is bounded (poll deadlines, SO_RCVTIMEO, the store timeout); nothing sleeps.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/grpc_rendezvous_client.h"
#include "rendezvous/rendezvous_server.h"
#include "tests/unit/c10d_store_wire.h"

namespace drun {
namespace {

using c10d_store::Dialect;
using c10d_store::Op;
using c10d_store::wire::Encode;
using c10d_store::wire::Req;
using c10d_store::wire::Str;
using c10d_store::wire::U64;

constexpr auto kWait = std::chrono::seconds(30);

// A port nobody listens on right now (bound and released).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// A raw TCP client with a receive deadline.
class Raw {
 public:
  explicit Raw(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval tv{20, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Raw() { close(fd_); }
  bool connected() const { return connected_; }
  bool Send(const std::string& s) {
    return send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // Exactly n bytes, or what came before EOF / the deadline.
  std::string Recv(size_t n) {
    std::string out;
    char buf[256];
    while (out.size() < n) {
      ssize_t r = recv(fd_, buf, std::min(sizeof buf, n - out.size()), 0);
      if (r <= 0) break;
      out.append(buf, static_cast<size_t>(r));
    }
    return out;
  }
  // Waits (up to the receive deadline) for the server to close the connection.
  // Returns "closed", "reset", "timeout" or "data".
  std::string WaitClosed() {
    char c;
    ssize_t r = recv(fd_, &c, 1, 0);
    if (r == 0) return "closed";
    if (r > 0) return "data";
    return errno == ECONNRESET ? "reset" : "timeout";
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// One drun agent on the wire: the agent's own gRPC client.
class Agent {
 public:
  static std::unique_ptr<Agent> Connect(int port, const std::string& run_id) {
    GrpcClientOptions o;
    o.target = "127.0.0.1:" + std::to_string(port);
    o.connect_timeout = kWait;
    o.silence = Duration::zero();
    int stop_signal = 0;
    auto c = ConnectRendezvous(o, &stop_signal);
    if (!c.ok()) return nullptr;
    auto a = std::unique_ptr<Agent>(new Agent(std::move(*c)));
    v1::AgentMessage hello;
    hello.mutable_hello()->set_run_id(run_id);
    hello.mutable_hello()->set_hostname("test");
    hello.mutable_hello()->set_local_world_size(1);
    hello.mutable_hello()->set_requested_node_rank(-1);
    a->Send(hello);
    a->Join();
    return a;
  }
  void Send(const v1::AgentMessage& m) { client_->Send(m, Clock::now()); }
  void Join() {
    v1::AgentMessage j;
    j.mutable_join()->set_free_port(0);
    Send(j);
  }
  // The next message other than Waiting/Heartbeat, or nullopt after kWait.
  std::optional<v1::ServerMessage> Next() {
    const TimePoint deadline = Clock::now() + kWait;
    for (;;) {
      while (auto m = client_->Receive()) {
        if (!m->has_waiting() && !m->has_heartbeat()) return m;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - Clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{client_->wakeup_fd(), POLLIN, 0};
      poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 500)));
      client_->OnTick(Clock::now());  // heartbeats
    }
  }
  // Waits for the round's Assignment (answering a Stop with a Join).
  std::optional<v1::Assignment> Assignment() {
    while (auto m = Next()) {
      if (m->has_assignment()) return m->assignment();
      if (m->has_stop()) {
        Join();
        continue;
      }
      ADD_FAILURE() << "unexpected: " << m->ShortDebugString();
      return std::nullopt;
    }
    return std::nullopt;
  }

 private:
  explicit Agent(std::unique_ptr<RendezvousClient> c) : client_(std::move(c)) {}
  std::unique_ptr<RendezvousClient> client_;
};

RendezvousState::Config OneNodeJob(int master_port, int max_restarts = 0) {
  RendezvousState::Config c;
  c.min_nodes = c.max_nodes = 1;
  c.max_restarts = max_restarts;
  c.run_id = "oneport";
  c.use_agent_store = true;
  c.fixed_master_port = master_port;
  c.last_call_timeout = std::chrono::milliseconds(1);
  return c;
}

// Runs tests/store/one_port_clients.py; returns its exit status and output.
std::pair<int, std::string> RunTorchClients(int port, const std::string& phase) {
  const std::string cmd = std::string(DRUN_TORCH_PYTHON) + " " + ONE_PORT_CLIENTS + " " +
                          std::to_string(port) + " " + phase + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const int status = pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

struct Started {
  std::unique_ptr<RendezvousServer> server;
  int port = 0;
};

Started StartShared(int max_restarts = 0,
                    Duration first_bytes_timeout = std::chrono::seconds(10)) {
  // The port must be known before Start: it is the configured master port.
  for (int attempt = 0; attempt < 20; ++attempt) {
    const int port = FreePort();
    RendezvousServer::Options opt;
    opt.first_bytes_timeout = first_bytes_timeout;
    auto s = RendezvousServer::Start("127.0.0.1:" + std::to_string(port),
                                     OneNodeJob(port, max_restarts), opt);
    if (s.ok()) return {std::move(*s), port};
  }
  return {};
}

TEST(OnePort, TorchClientsUseTheRendezvousPortAcrossTwoRounds) {
  Started s = StartShared(/*max_restarts=*/1);
  ASSERT_NE(s.server, nullptr);
  EXPECT_TRUE(s.server->serves_store());
  auto agent = Agent::Connect(s.port, "oneport");
  ASSERT_NE(agent, nullptr);

  auto first = agent->Assignment();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->master_port(), s.port);  // MASTER_PORT = the port the user gave
  EXPECT_EQ(first->master_addr(), "");      // "where you reach the rendezvous"
  auto [code1, out1] = RunTorchClients(s.port, "round1");
  if (code1 == 77) GTEST_SKIP() << out1;
  ASSERT_EQ(code1, 0) << out1;
  EXPECT_NE(out1.find("ok round1"), std::string::npos) << out1;

  // A worker failed: the round restarts with a fresh store on the same port.
  v1::AgentMessage failed;
  failed.mutable_failed()->set_round(first->round());
  failed.mutable_failed()->mutable_failure()->set_exit_code(1);
  agent->Send(failed);
  auto second = agent->Assignment();
  ASSERT_TRUE(second.has_value());
  EXPECT_GT(second->round(), first->round());
  EXPECT_EQ(second->master_port(), s.port);
  auto [code2, out2] = RunTorchClients(s.port, "round2");
  ASSERT_EQ(code2, 0) << out2;
  EXPECT_NE(out2.find("ok round2"), std::string::npos) << out2;

  v1::AgentMessage done;
  done.mutable_succeeded()->set_round(second->round());
  agent->Send(done);
  auto fin = agent->Next();
  ASSERT_TRUE(fin.has_value());
  EXPECT_TRUE(fin->has_finish()) << fin->ShortDebugString();
  EXPECT_EQ(fin->finish().exit_code(), 0);
}

TEST(OnePort, ASilentClientHoldsUpNobodyAndIsClosedAfterTheBound) {
  Started s = StartShared(0, std::chrono::milliseconds(500));
  ASSERT_NE(s.server, nullptr);
  Raw silent(s.port);
  ASSERT_TRUE(silent.connected());
  // While it says nothing, an agent connects and its round starts.
  auto agent = Agent::Connect(s.port, "oneport");
  ASSERT_NE(agent, nullptr);
  auto a = agent->Assignment();
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->master_port(), s.port);
  // And a store client that speaks is served meanwhile.
  Raw store(s.port);
  ASSERT_TRUE(store.Send(Encode(Dialect::kV113, Req(Op::kAdd, {"/n"}, {}, 41))));
  EXPECT_EQ(store.Recv(8), U64(41));
  // The silent one is closed once its bound has passed (the receive deadline is 20 s).
  const std::string how = silent.WaitClosed();
  EXPECT_TRUE(how == "closed" || how == "reset") << how;
}

TEST(OnePort, Torch113ClientsDoNotMissTheirSilentConnection) {
  // torch 1.13 opens a second connection per TCPStore that speaks only for watchKey(); the
  // server closes it once the bound has passed. The clients go on working.
  Started s = StartShared(0, std::chrono::milliseconds(300));
  ASSERT_NE(s.server, nullptr);
  auto agent = Agent::Connect(s.port, "oneport");
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(agent->Assignment().has_value());
  auto [code, out] = RunTorchClients(s.port, "outlive");
  if (code == 77) GTEST_SKIP() << out;
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("ok outlive"), std::string::npos) << out;
}

TEST(OnePort, GarbageIsClosed) {
  Started s = StartShared();
  ASSERT_NE(s.server, nullptr);
  for (const std::string& bytes : {std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
                                  std::string("PRI * HTTP/1.1\r\n\r\n\r\n\r\n\r\n"),
                                  std::string("\xff\xfe\xfd", 3)}) {
    Raw junk(s.port);
    ASSERT_TRUE(junk.connected());
    ASSERT_TRUE(junk.Send(bytes));
    const std::string how = junk.WaitClosed();
    EXPECT_TRUE(how == "closed" || how == "reset") << how << " for " << bytes;
  }
  // The port still serves agents.
  auto agent = Agent::Connect(s.port, "oneport");
  ASSERT_NE(agent, nullptr);
  EXPECT_TRUE(agent->Assignment().has_value());
}

TEST(OnePort, AStoreClientBeforeTheFirstRoundWaitsForItsStore) {
  Started s = StartShared();
  ASSERT_NE(s.server, nullptr);
  Raw early(s.port);
  ASSERT_TRUE(early.connected());
  // SET then GET: the GET's reply can only come from a store.
  ASSERT_TRUE(early.Send(Encode(Dialect::kV113, Req(Op::kSet, {"/k"}, {"v"})) +
                         Encode(Dialect::kV113, Req(Op::kGet, {"/k"}))));
  auto agent = Agent::Connect(s.port, "oneport");
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(agent->Assignment().has_value());
  EXPECT_EQ(early.Recv(9), Str("v"));
}

TEST(OnePort, Torch2HandshakeAndPingThroughTheSharedPort) {
  Started s = StartShared();
  ASSERT_NE(s.server, nullptr);
  auto agent = Agent::Connect(s.port, "oneport");
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(agent->Assignment().has_value());
  // torch 2.x opens with VALIDATE + PING in one segment; the server echoes the nonce.
  Raw v2(s.port);
  ASSERT_TRUE(v2.Send(c10d_store::wire::Handshake(0x5a71)));
  EXPECT_EQ(v2.Recv(4), c10d_store::wire::U32(0x5a71));
  ASSERT_TRUE(v2.Send(Encode(Dialect::kV2, Req(Op::kAdd, {"/n"}, {}, 4))));
  EXPECT_EQ(v2.Recv(8), U64(4));
}

TEST(OnePort, AnotherConfiguredPortIsTheStoresOwn) {
  const int store_port = FreePort();
  auto s = RendezvousServer::Start("127.0.0.1:0", OneNodeJob(store_port));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE((*s)->serves_store());
  auto agent = Agent::Connect((*s)->port(), "oneport");
  ASSERT_NE(agent, nullptr);
  auto a = agent->Assignment();
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->master_port(), store_port);
  Raw store(store_port);
  ASSERT_TRUE(store.Send(Encode(Dialect::kV113, Req(Op::kAdd, {"/n"}, {}, 3))));
  EXPECT_EQ(store.Recv(8), U64(3));
}

TEST(OwnPort, GarbageStoreRequestsAndSilenceAreClosedBeforeGrpc) {
  // The rendezvous on a port of its own sorts connections too: only the HTTP/2
  // preface goes on to gRPC.
  RendezvousServer::Options opt;
  opt.first_bytes_timeout = std::chrono::milliseconds(500);
  auto s = RendezvousServer::Start("127.0.0.1:0", OneNodeJob(0), opt);
  ASSERT_TRUE(s.ok()) << s.status();
  const int port = (*s)->port();
  Raw silent(port), garbage(port), store(port);
  ASSERT_TRUE(silent.connected() && garbage.connected() && store.connected());
  ASSERT_TRUE(garbage.Send("GET / HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(store.Send(Encode(Dialect::kV113, Req(Op::kAdd, {"/n"}, {}, 3))));
  for (Raw* r : {&garbage, &store}) {
    const std::string how = r->WaitClosed();
    EXPECT_TRUE(how == "closed" || how == "reset") << how;
  }
  // While the silent one waits for its bound, an agent connects and is served.
  auto agent = Agent::Connect(port, "oneport");
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(agent->Assignment().has_value());
  const std::string how = silent.WaitClosed();
  EXPECT_TRUE(how == "closed" || how == "reset") << how;
}

TEST(OwnPort, OneAddressHoldsAtMost64SilentConnections) {
  // A flood of connections that say nothing costs the server 64 descriptors per address;
  // beyond that they close at once, and once some go, an agent gets in again.
  RendezvousServer::Options opt;
  opt.first_bytes_timeout = std::chrono::seconds(60);
  auto s = RendezvousServer::Start("127.0.0.1:0", OneNodeJob(0), opt);
  ASSERT_TRUE(s.ok()) << s.status();
  const int port = (*s)->port();
  std::vector<std::unique_ptr<Raw>> silent;
  for (int i = 0; i < 64; ++i) {
    silent.push_back(std::make_unique<Raw>(port));
    ASSERT_TRUE(silent.back()->connected());
  }
  Raw one_more(port);
  ASSERT_TRUE(one_more.connected());  // the kernel accepts; the server closes it
  const std::string how = one_more.WaitClosed();
  EXPECT_TRUE(how == "closed" || how == "reset") << how;
  silent.clear();
  auto agent = Agent::Connect(port, "oneport");
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(agent->Assignment().has_value());
}

TEST(OnePort, NoConfiguredPortPicksAFreeOne) {
  auto s = RendezvousServer::Start("127.0.0.1:0", OneNodeJob(0));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE((*s)->serves_store());
  auto agent = Agent::Connect((*s)->port(), "oneport");
  ASSERT_NE(agent, nullptr);
  auto a = agent->Assignment();
  ASSERT_TRUE(a.has_value());
  EXPECT_GT(a->master_port(), 0);
  EXPECT_NE(a->master_port(), (*s)->port());
  Raw store(a->master_port());
  ASSERT_TRUE(store.Send(Encode(Dialect::kV113, Req(Op::kAdd, {"/n"}, {}, 2))));
  EXPECT_EQ(store.Recv(8), U64(2));
}

}  // namespace
}  // namespace drun
