// TlsRelay and TlsConnect over real loopback TCP, with certificates the
// openssl command makes at test time (tests/make_tls_certs.sh).
#include "rendezvous/base/tls_relay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "rendezvous/base/random.h"

namespace drun {
namespace {

class TlsRelayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto d = MakeTempDir("drun-tls-test");
    ASSERT_TRUE(d.ok());
    dir_ = new std::string(*d);
    const std::string cmd = std::string("sh ") + DRUN_MAKE_TLS_CERTS + " " + *dir_;
    ASSERT_EQ(system(cmd.c_str()), 0) << cmd;
  }
  static void TearDownTestSuite() {
    if (dir_ == nullptr) return;
    const std::string cmd = "rm -rf '" + *dir_ + "'";  // mkdtemp's name: no quote in it
    EXPECT_EQ(system(cmd.c_str()), 0);
    delete dir_;
    dir_ = nullptr;
  }
  static std::string F(const std::string& name) { return *dir_ + "/" + name; }
  static std::shared_ptr<const TlsContext> Ctx(TlsContext::Side side, const std::string& who,
                                               const std::string& ca = "ca") {
    auto c = TlsContext::Load(side, F(who + ".pem"), F(who + ".key"), F(ca + ".pem"));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : nullptr;
  }

  // A connected loopback TCP pair, both ends non-blocking.
  static void TcpPair(UniqueFd* client, UniqueFd* server) {
    UniqueFd l(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ASSERT_EQ(bind(l.get(), reinterpret_cast<sockaddr*>(&a), len), 0);
    ASSERT_EQ(listen(l.get(), 1), 0);
    ASSERT_EQ(getsockname(l.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
    client->reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_EQ(connect(client->get(), reinterpret_cast<sockaddr*>(&a), len), 0);
    server->reset(accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    ASSERT_TRUE(server->valid());
    ASSERT_EQ(fcntl(client->get(), F_SETFL, O_NONBLOCK), 0);
  }

  struct Refusal {
    std::atomic<int> count{0};
    std::atomic<TlsFailure> last{TlsFailure::kOther};
  };
  static std::unique_ptr<TlsRelay> Relay(Refusal* r = nullptr, Duration hs = std::chrono::seconds(10)) {
    TlsRelay::Options o;
    o.handshake_timeout = hs;
    if (r != nullptr) {
      o.on_refused = [r](const std::string&, TlsFailure f, const std::string&) {
        r->last = f;
        r->count++;
      };
    }
    auto relay = TlsRelay::Start(std::move(o));
    EXPECT_TRUE(relay.ok());
    return std::move(*relay);
  }

  // Blocking-style helpers on a non-blocking plain end, bounded by 10 s.
  static bool WaitFor(int fd, short ev) {
    pollfd p{fd, ev, 0};
    return poll(&p, 1, 10000) == 1;
  }
  static void SendAll(int fd, const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n > 0) off += n;
      else ASSERT_TRUE(WaitFor(fd, POLLOUT));
    }
  }
  // Reads until `want` bytes or end-of-file; *eof says which.
  static std::string Recv(int fd, size_t want, bool* eof = nullptr) {
    std::string got;
    char buf[65536];
    while (got.size() < want) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n > 0) {
        got.append(buf, n);
      } else if (n == 0) {
        if (eof) *eof = true;
        break;
      } else if (!WaitFor(fd, POLLIN)) {
        break;
      }
    }
    return got;
  }

  // A client and a server relay joined over TLS; the two plain ends.
  struct Pair {
    std::unique_ptr<TlsRelay> server, client;
    UniqueFd server_plain, client_plain;
  };
  static Pair Connect(const std::string& client_who = "client") {
    Pair p;
    UniqueFd c, s;
    TcpPair(&c, &s);
    p.server = Relay();
    p.client = Relay();
    auto sp = p.server->Accept(std::move(s), *Ctx(TlsContext::Side::kServer, "server"), "127.0.0.1");
    EXPECT_TRUE(sp.ok());
    p.server_plain = std::move(*sp);
    auto ssl = TlsConnect(*Ctx(TlsContext::Side::kClient, client_who), c.get(),
                          Clock::now() + std::chrono::seconds(10), nullptr);
    EXPECT_TRUE(ssl.ok()) << ssl.status();
    auto cp = p.client->Adopt(std::move(c), std::move(*ssl));
    EXPECT_TRUE(cp.ok());
    p.client_plain = std::move(*cp);
    return p;
  }
  // Bounded poll on an observable state: no event says "the relay let go".
  static bool Drained(const TlsRelay& r) {
    for (int i = 0; i < 1000 && r.connections() > 0; ++i) poll(nullptr, 0, 10);
    return r.connections() == 0;
  }

  static std::string* dir_;
};
std::string* TlsRelayTest::dir_ = nullptr;

TEST_F(TlsRelayTest, EchoThroughAPair) {
  Pair p = Connect();
  SendAll(p.client_plain.get(), "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  EXPECT_EQ(Recv(p.server_plain.get(), 24), "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  SendAll(p.server_plain.get(), "pong");
  EXPECT_EQ(Recv(p.client_plain.get(), 4), "pong");
}

TEST_F(TlsRelayTest, LargeTransferBothWaysAtOnce) {
  Pair p = Connect();
  std::string up(8 << 20, 0), down(8 << 20, 0);
  for (size_t i = 0; i < up.size(); ++i) {
    up[i] = static_cast<char>(i * 7 + (i >> 13));
    down[i] = static_cast<char>(i * 13 + (i >> 11));
  }
  std::string got_up, got_down;
  std::thread a([&] { SendAll(p.client_plain.get(), up); });
  std::thread b([&] { SendAll(p.server_plain.get(), down); });
  std::thread c([&] { got_up = Recv(p.server_plain.get(), up.size()); });
  got_down = Recv(p.client_plain.get(), down.size());
  a.join();
  b.join();
  c.join();
  EXPECT_TRUE(got_up == up) << got_up.size();
  EXPECT_TRUE(got_down == down) << got_down.size();
}

TEST_F(TlsRelayTest, PeerCloseDeliversEverythingThenEndOfFile) {
  Pair p = Connect();
  const std::string last(100000, 'z');
  SendAll(p.client_plain.get(), last);
  p.client_plain.reset();  // gRPC closing its channel
  bool eof = false;
  EXPECT_EQ(Recv(p.server_plain.get(), last.size() + 1, &eof), last);
  EXPECT_TRUE(eof);
  EXPECT_TRUE(Drained(*p.server));
  EXPECT_TRUE(Drained(*p.client));
}

TEST_F(TlsRelayTest, ServerSideCloseEndsTheClientsPlainEnd) {
  Pair p = Connect();
  SendAll(p.server_plain.get(), "bye");
  p.server_plain.reset();
  bool eof = false;
  EXPECT_EQ(Recv(p.client_plain.get(), 4, &eof), "bye");
  EXPECT_TRUE(eof);
  EXPECT_TRUE(Drained(*p.client));
  EXPECT_TRUE(Drained(*p.server));
}

TEST_F(TlsRelayTest, ClientOfAnotherCaIsRefusedOnBothSides) {
  UniqueFd c, s;
  TcpPair(&c, &s);
  Refusal refused;
  auto server = Relay(&refused);
  auto sp = server->Accept(std::move(s), *Ctx(TlsContext::Side::kServer, "server"), "127.0.0.1");
  ASSERT_TRUE(sp.ok());
  // The client trusts the job's CA, but its own certificate is another CA's.
  auto ctx = TlsContext::Load(TlsContext::Side::kClient, F("other.pem"), F("other.key"), F("ca.pem"));
  ASSERT_TRUE(ctx.ok());
  TlsFailure why = TlsFailure::kOther;
  auto ssl = TlsConnect(**ctx, c.get(), Clock::now() + std::chrono::seconds(10), nullptr, &why);
  ASSERT_FALSE(ssl.ok());
  EXPECT_EQ(why, TlsFailure::kRefusedByPeer) << ssl.status();
  EXPECT_TRUE(Drained(*server));
  EXPECT_EQ(refused.count.load(), 1);
  EXPECT_EQ(refused.last.load(), TlsFailure::kPeerCertRejected);
  bool eof = false;
  Recv(sp->get(), 1, &eof);
  EXPECT_TRUE(eof);  // gRPC's end sees the connection end
}

TEST_F(TlsRelayTest, ServerOfAnotherCaIsRefusedByTheClient) {
  UniqueFd c, s;
  TcpPair(&c, &s);
  Refusal refused;
  auto server = Relay(&refused);
  auto sctx = TlsContext::Load(TlsContext::Side::kServer, F("other.pem"), F("other.key"), F("other-ca.pem"));
  ASSERT_TRUE(sctx.ok());
  auto sp = server->Accept(std::move(s), **sctx, "127.0.0.1");
  ASSERT_TRUE(sp.ok());
  TlsFailure why = TlsFailure::kOther;
  auto ssl = TlsConnect(*Ctx(TlsContext::Side::kClient, "client"), c.get(),
                        Clock::now() + std::chrono::seconds(10), nullptr, &why);
  ASSERT_FALSE(ssl.ok());
  EXPECT_EQ(why, TlsFailure::kPeerCertRejected) << ssl.status();
  EXPECT_NE(ssl.status().message().find("not signed by the CA"), std::string::npos) << ssl.status();
  EXPECT_TRUE(Drained(*server));
}

TEST_F(TlsRelayTest, PlainPeerThatClosesIsPeerClosed) {
  UniqueFd c, s;
  TcpPair(&c, &s);
  // What a rendezvous without --rdzv-tls does with a TLS ClientHello: close.
  std::thread closer([&] {
    WaitFor(s.get(), POLLIN);
    s.reset();
  });
  TlsFailure why = TlsFailure::kOther;
  auto ssl = TlsConnect(*Ctx(TlsContext::Side::kClient, "client"), c.get(),
                        Clock::now() + std::chrono::seconds(10), nullptr, &why);
  closer.join();
  ASSERT_FALSE(ssl.ok());
  EXPECT_EQ(why, TlsFailure::kPeerClosed) << ssl.status();
}

TEST_F(TlsRelayTest, SilentClientIsClosedAfterTheHandshakeTimeout) {
  UniqueFd c, s;
  TcpPair(&c, &s);
  Refusal refused;
  auto server = Relay(&refused, std::chrono::milliseconds(200));
  auto sp = server->Accept(std::move(s), *Ctx(TlsContext::Side::kServer, "server"), "127.0.0.1");
  ASSERT_TRUE(sp.ok());
  bool eof = false;
  Recv(sp->get(), 1, &eof);  // ends when the relay gives up
  EXPECT_TRUE(eof);
  EXPECT_EQ(refused.last.load(), TlsFailure::kTimeout);
  EXPECT_TRUE(Drained(*server));
}

// The plain end can only say end-of-file; on_broken says why (the agent's
// "the connection broke (TLS: Connection reset by peer)").
TEST_F(TlsRelayTest, ALinkThatBreaksSaysWhy) {
  UniqueFd c, s;
  TcpPair(&c, &s);
  auto sctx = Ctx(TlsContext::Side::kServer, "server");
  std::thread server([&] {  // a bare OpenSSL server that resets the link
    ASSERT_EQ(fcntl(s.get(), F_SETFL, 0), 0);
    SslPtr ssl(SSL_new(sctx->get()));
    SSL_set_fd(ssl.get(), s.get());
    ASSERT_EQ(SSL_accept(ssl.get()), 1);
    const char ok = kTlsAccepted;
    ASSERT_EQ(SSL_write(ssl.get(), &ok, 1), 1);
    char buf[4];
    ASSERT_EQ(SSL_read(ssl.get(), buf, sizeof buf), 4);
    linger reset{1, 0};
    setsockopt(s.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    s.reset();
  });
  auto ssl = TlsConnect(*Ctx(TlsContext::Side::kClient, "client"), c.get(),
                        Clock::now() + std::chrono::seconds(10), nullptr);
  ASSERT_TRUE(ssl.ok()) << ssl.status();
  auto relay = Relay();
  std::promise<std::string> why;
  auto cp = relay->Adopt(std::move(c), std::move(*ssl), [&](const std::string& w) { why.set_value(w); });
  ASSERT_TRUE(cp.ok());
  SendAll(cp->get(), "ping");
  server.join();
  bool eof = false;
  Recv(cp->get(), 1, &eof);
  EXPECT_TRUE(eof);
  auto said = why.get_future();
  ASSERT_EQ(said.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(said.get(), "Connection reset by peer");
}

TEST_F(TlsRelayTest, KeyOfAnotherCertificateIsRefusedAtLoad) {
  auto ctx = TlsContext::Load(TlsContext::Side::kServer, F("server.pem"), F("client.key"), F("ca.pem"));
  ASSERT_FALSE(ctx.ok());
  EXPECT_NE(ctx.status().message().find("does not belong to the certificate"), std::string::npos)
      << ctx.status();
  const std::string key = F("client.key");
  ASSERT_EQ(chmod(key.c_str(), 0640), 0);  // on every host, not only where drun was typed
  auto open_key = TlsContext::Load(TlsContext::Side::kClient, F("client.pem"), key, F("ca.pem"));
  ASSERT_EQ(chmod(key.c_str(), 0600), 0);
  ASSERT_FALSE(open_key.ok());
  EXPECT_EQ(open_key.status().message(),
            "--rdzv-tls key '" + key + "' may be read by others (mode 0640); run chmod 600 '" + key + "'");
  auto missing = TlsContext::Load(TlsContext::Side::kServer, F("server.pem"), F("server.key"), F("nope.pem"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot load the CA certificate"), std::string::npos)
      << missing.status();
}

TEST_F(TlsRelayTest, ManyConnectionsShareOneRelay) {
  auto server = Relay();
  auto client = Relay();
  auto sctx = Ctx(TlsContext::Side::kServer, "server");
  auto cctx = Ctx(TlsContext::Side::kClient, "client");
  std::vector<UniqueFd> sides;
  for (int i = 0; i < 64; ++i) {
    UniqueFd c, s;
    TcpPair(&c, &s);
    auto sp = server->Accept(std::move(s), *sctx, "127.0.0.1");
    auto ssl = TlsConnect(*cctx, c.get(), Clock::now() + std::chrono::seconds(10), nullptr);
    ASSERT_TRUE(ssl.ok()) << ssl.status();
    auto cp = client->Adopt(std::move(c), std::move(*ssl));
    SendAll(cp->get(), "n" + std::to_string(i));
    EXPECT_EQ(Recv(sp->get(), 1 + std::to_string(i).size()), "n" + std::to_string(i));
    sides.push_back(std::move(*sp));
    sides.push_back(std::move(*cp));
  }
  EXPECT_EQ(server->connections(), 64u);
  sides.clear();
  EXPECT_TRUE(Drained(*server));
  EXPECT_TRUE(Drained(*client));
}

}  // namespace
}  // namespace drun
