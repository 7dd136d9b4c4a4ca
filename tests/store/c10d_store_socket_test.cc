// C10dStoreServer over real sockets, with the raw bytes of docs/c10d_store_protocol.md.
// Every read has a deadline (SO_RCVTIMEO), so a missing reply fails the test instead of
// hanging it; "no reply yet" is shown by a later reply arriving first, never by sleeping.
#include "rendezvous/store/c10d_store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "tests/unit/c10d_store_wire.h"

namespace drun {
namespace {

using c10d_store::Dialect;
using c10d_store::Op;
using c10d_store::wire::Byte;
using c10d_store::wire::Encode;
using c10d_store::wire::Handshake;
using c10d_store::wire::Hex;
using c10d_store::wire::I64;
using c10d_store::wire::Req;
using c10d_store::wire::Str;
using c10d_store::wire::U32;
using c10d_store::wire::U64;

// A blocking client socket with a receive deadline.
class Client {
 public:
  Client(int port, const char* addr = "127.0.0.1") {
    const bool v6 = std::string(addr).find(':') != std::string::npos;
    fd_ = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval tv{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int rc;
    if (v6) {
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_port = htons(static_cast<uint16_t>(port));
      inet_pton(AF_INET6, addr, &a.sin6_addr);
      rc = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(port));
      inet_pton(AF_INET, addr, &a.sin_addr);
      rc = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    }
    connected_ = rc == 0;
  }
  ~Client() {
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return connected_; }

  bool Send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads exactly n bytes; returns what arrived before EOF/error/deadline.
  std::string Recv(size_t n) {
    std::string out(n, '\0');
    size_t off = 0;
    while (off < n) {
      ssize_t r = recv(fd_, &out[off], n - off, 0);
      if (r <= 0) break;
      off += static_cast<size_t>(r);
    }
    out.resize(off);
    return out;
  }

  // True when the server closed the connection (EOF or reset) before the deadline.
  bool ClosedByPeer() {
    char c;
    for (;;) {
      ssize_t r = recv(fd_, &c, 1, 0);
      if (r == 0) return true;
      if (r < 0) return errno == ECONNRESET;
      // Replies owed before the error may still be in flight: skip them.
    }
  }

  // One request, its reply of the given size.
  std::string Call(const std::string& request, size_t reply_size) {
    EXPECT_TRUE(Send(request));
    return Recv(reply_size);
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::string V2(Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {},
               int64_t delta = 0, uint32_t nonce = 0) {
  return Encode(Dialect::kV2, Req(op, std::move(keys), std::move(values), delta, nonce));
}
std::string V113(Op op, std::vector<std::string> keys = {},
                 std::vector<std::string> values = {}, int64_t delta = 0) {
  return Encode(Dialect::kV113, Req(op, std::move(keys), std::move(values), delta));
}

class SocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = C10dStoreServer::Start("127.0.0.1", 0);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    ASSERT_GT(server_->port(), 0);
  }
  std::unique_ptr<Client> Connect2x(uint32_t nonce = 0x5a71) {
    auto c = std::make_unique<Client>(server_->port());
    EXPECT_TRUE(c->connected());
    EXPECT_EQ(c->Call(Handshake(nonce), 4), U32(nonce));
    return c;
  }
  std::unique_ptr<C10dStoreServer> server_;
};

TEST_F(SocketTest, ValidateAndPingCapture) {
  Client c(server_->port());
  ASSERT_TRUE(c.connected());
  // C->S `00 ce f7 85 3c 0d 71 5a 00 00` in one segment, S->C `71 5a 00 00`.
  const std::string hello("\x00\xce\xf7\x85\x3c\x0d\x71\x5a\x00\x00", 10);
  EXPECT_EQ(Hex(c.Call(hello, 4)), "715a0000");
  // PING works again later.
  EXPECT_EQ(c.Call(V2(Op::kPing, {}, {}, 0, 0xdeadbeef), 4), U32(0xdeadbeef));
}

TEST_F(SocketTest, Torch2KeyValueOps) {
  auto c = Connect2x();
  // set, then get as the client does it: WAIT then GET.
  ASSERT_TRUE(c->Send(V2(Op::kSet, {"/k1"}, {"v1"})));
  EXPECT_EQ(c->Call(V2(Op::kWait, {"/k1"}) + V2(Op::kGet, {"/k1"}), 1 + 10),
            Byte(0) + Str("v1"));
  EXPECT_EQ(c->Call(V2(Op::kAdd, {"/cnt"}, {}, 5), 8), I64(5));
  EXPECT_EQ(c->Call(V2(Op::kAdd, {"/cnt"}, {}, -2), 8), I64(3));
  EXPECT_EQ(c->Call(V2(Op::kGet, {"/cnt"}), 9), Str("3"));
  EXPECT_EQ(c->Call(V2(Op::kCompareSet, {"/k1"}, {"v1", "v2"}), 10), Str("v2"));
  EXPECT_EQ(c->Call(V2(Op::kCompareSet, {"/x"}, {"x", "y"}), 9), Str("x"));
  EXPECT_EQ(c->Call(V2(Op::kCheck, {"/k1", "/cnt"}), 1), Byte(0));
  EXPECT_EQ(c->Call(V2(Op::kCheck, {"/k1", "/nope"}), 1), Byte(1));
  EXPECT_EQ(c->Call(V2(Op::kGetNumKeys), 8), I64(2));
  EXPECT_EQ(c->Call(V2(Op::kDeleteKey, {"/k1"}), 8), I64(1));
  EXPECT_EQ(c->Call(V2(Op::kDeleteKey, {"/k1"}), 8), I64(0));
}

TEST_F(SocketTest, AppendMultiSetMultiGet) {
  auto c = Connect2x();
  // Spec: two appends "x","y" then multi_get -> b'xy'.
  ASSERT_TRUE(c->Send(V2(Op::kAppend, {"/ap"}, {"x"}) + V2(Op::kAppend, {"/ap"}, {"y"})));
  ASSERT_TRUE(c->Send(V2(Op::kMultiSet, {"/m1", "/m2"}, {"v2", "xy"})));
  EXPECT_EQ(c->Call(V2(Op::kWait, {"/ap", "/m1", "/m2"}) +
                        V2(Op::kMultiGet, {"/m1", "/m2", "/ap"}),
                    1 + 3 * 10),
            Byte(0) + Str("v2") + Str("xy") + Str("xy"));
  // The spec's MULTI_GET reply capture.
  EXPECT_EQ(Hex(c->Call(V2(Op::kMultiGet, {"/m1", "/m2"}), 20)),
            "0200000000000000763202000000000000007879");
}

TEST_F(SocketTest, DeferredWaitIsReleasedByAnotherConnection) {
  auto waiter = Connect2x(1);
  auto setter = Connect2x(2);
  ASSERT_TRUE(waiter->Send(V2(Op::kWait, {"/w1", "/w2"})));
  // The PING echo arriving first shows the WAIT is parked.
  EXPECT_EQ(waiter->Call(V2(Op::kPing, {}, {}, 0, 11), 4), U32(11));
  ASSERT_TRUE(setter->Send(V2(Op::kSet, {"/w1"}, {"a"})));
  EXPECT_EQ(waiter->Call(V2(Op::kPing, {}, {}, 0, 12), 4), U32(12));  // still parked
  EXPECT_EQ(setter->Call(V2(Op::kAdd, {"/w2"}, {}, 1), 8), I64(1));
  EXPECT_EQ(waiter->Recv(1), Byte(0));
}

TEST_F(SocketTest, CancelWaitRepliesCanceled) {
  auto c = Connect2x();
  ASSERT_TRUE(c->Send(V2(Op::kWait, {"/never"})));
  // E26 capture: C->S `0c`, S->C `01`.
  EXPECT_EQ(Hex(c->Call(std::string("\x0c", 1), 1)), "01");
  auto other = Connect2x(3);
  ASSERT_TRUE(other->Send(V2(Op::kSet, {"/never"}, {"1"})));
  // No stray STOP_WAITING: the next reply on `c` is the PING echo.
  EXPECT_EQ(other->Call(V2(Op::kPing, {}, {}, 0, 4), 4), U32(4));
  EXPECT_EQ(c->Call(V2(Op::kPing, {}, {}, 0, 5), 4), U32(5));
}

TEST_F(SocketTest, QueueOps) {
  auto c = Connect2x();
  auto popper = Connect2x(9);
  // A blocking pop parks on WAIT [q] until a push arrives.
  ASSERT_TRUE(popper->Send(V2(Op::kWait, {"/q"})));
  EXPECT_EQ(popper->Call(V2(Op::kPing, {}, {}, 0, 1), 4), U32(1));
  ASSERT_TRUE(c->Send(V2(Op::kQueuePush, {"/q"}, {"a"}) + V2(Op::kQueuePush, {"/q"}, {"bb"})));
  EXPECT_EQ(popper->Recv(1), Byte(0));
  EXPECT_EQ(popper->Call(V2(Op::kQueuePop, {"/q"}), 8 + 9), I64(2) + Str("a"));
  EXPECT_EQ(c->Call(V2(Op::kQueueLen, {"/q"}), 8), I64(1));
  EXPECT_EQ(c->Call(V2(Op::kQueuePop, {"/q"}), 8 + 10), I64(1) + Str("bb"));
  EXPECT_EQ(c->Call(V2(Op::kQueuePop, {"/q"}), 8), I64(0));
  EXPECT_EQ(c->Call(V2(Op::kQueueLen, {"/q"}), 8), I64(0));
}

TEST_F(SocketTest, Torch113ClientAndTorch2ClientShareTheStore) {
  Client old(server_->port());
  ASSERT_TRUE(old.connected());
  // 1.13: first bytes are ADD "init/" +1, opcode in its own segment.
  ASSERT_TRUE(old.Send(Byte(3)));
  EXPECT_EQ(old.Call(Str("init/") + I64(1), 8), I64(1));
  ASSERT_TRUE(old.Send(V113(Op::kSet, {"/shared"}, {"from113"})));
  auto fresh = Connect2x();
  EXPECT_EQ(fresh->Call(V2(Op::kAdd, {"init/"}, {}, 1), 8), I64(2));
  EXPECT_EQ(fresh->Call(V2(Op::kWait, {"/shared"}) + V2(Op::kGet, {"/shared"}), 1 + 15),
            Byte(0) + Str("from113"));
  EXPECT_EQ(old.Call(V113(Op::kGetNumKeys), 8), I64(2));
  // The 1.13 callback connection: idle until watchKey, then registered with 03.
  Client callback(server_->port());
  ASSERT_TRUE(callback.connected());
  EXPECT_EQ(callback.Call(V113(Op::kWatchKey, {"/watched"}), 1), Byte(3));
  ASSERT_TRUE(fresh->Send(V2(Op::kSet, {"/watched"}, {"1"})));
  EXPECT_EQ(callback.Recv(1 + 16 + 8 + 9), Byte(1) + Str("/watched") + Str("") + Str("1"));
}

TEST_F(SocketTest, SingleByteSegments) {
  Client c(server_->port());
  ASSERT_TRUE(c.connected());
  const std::string bytes = Handshake(77) + V2(Op::kSet, {"/k"}, {"value"}) +
                            V2(Op::kWait, {"/k"}) + V2(Op::kGet, {"/k"});
  for (char ch : bytes) ASSERT_TRUE(c.Send(std::string(1, ch)));
  EXPECT_EQ(c.Recv(4 + 1 + 13), U32(77) + Byte(0) + Str("value"));
}

TEST_F(SocketTest, HalfSentRequestDoesNotStallOtherClients) {
  // torch 1.13's server blocks in recv() on a half-received request, stalling every client.
  Client slow(server_->port());
  ASSERT_TRUE(slow.connected());
  ASSERT_TRUE(slow.Send(Byte(3) + U64(5) + "ini"));  // ADD "init/" cut in the middle
  auto other = Connect2x();
  EXPECT_EQ(other->Call(V2(Op::kAdd, {"/n"}, {}, 7), 8), I64(7));
  // The slow client finishes later and is served normally.
  EXPECT_EQ(slow.Call("t/" + I64(1), 8), I64(1));
}

TEST_F(SocketTest, LargeValueRoundTrip) {
  auto c = Connect2x();
  std::string value(8 << 20, '\0');
  for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 131);
  ASSERT_TRUE(c->Send(V2(Op::kSet, {"/big"}, {value})));
  std::string got = c->Call(V2(Op::kGet, {"/big"}), 8 + value.size());
  ASSERT_EQ(got.size(), 8 + value.size());
  EXPECT_TRUE(got == Str(value));
}

TEST_F(SocketTest, MissingKeyGetsAnEmptyValueOn2xConnections) {
  // As torch's libuv server, the 2.x default; the connection stays usable.
  auto c = Connect2x();
  ASSERT_TRUE(c->Send(V2(Op::kSet, {"/here"}, {"v"})));
  EXPECT_EQ(Hex(c->Call(V2(Op::kGet, {"/missing"}), 8)), "0000000000000000");
  EXPECT_EQ(c->Call(V2(Op::kMultiGet, {"/missing", "/here"}), 8 + 9), U64(0) + Str("v"));
  EXPECT_EQ(c->Call(V2(Op::kPing, {}, {}, 0, 3), 4), U32(3));
  EXPECT_EQ(server_->protocol_errors(), 0u);
}

TEST_F(SocketTest, ListKeysBytes) {
  auto c = Connect2x();
  // LIST_KEYS is the opcode alone (0x11); the reply is an int64 count and each key as a
  // string. One key, so the order of keys does not matter here.
  ASSERT_TRUE(c->Send(V2(Op::kSet, {"/k"}, {"value"})));
  EXPECT_EQ(Hex(c->Call(std::string("\x11", 1), 8 + 10)),
            "0100000000000000" "0200000000000000" "2f6b");
}

TEST_F(SocketTest, BarrierAcrossConnections) {
  auto a = Connect2x(1);
  auto b = Connect2x(2);
  auto c = Connect2x(3);
  // barrier("/done", 3) as TCPStore.cpp sends it: 0x12, the key, int64 world size.
  const std::string arrive("\x12\x05\x00\x00\x00\x00\x00\x00\x00/done\x03\x00\x00\x00\x00\x00\x00\x00",
                           22);
  ASSERT_TRUE(a->Send(arrive));
  ASSERT_TRUE(b->Send(arrive));
  // The PING echoes arriving first show both arrivals are parked.
  EXPECT_EQ(a->Call(V2(Op::kPing, {}, {}, 0, 11), 4), U32(11));
  EXPECT_EQ(b->Call(V2(Op::kPing, {}, {}, 0, 12), 4), U32(12));
  EXPECT_EQ(c->Call(V2(Op::kGet, {"/done"}), 9), Str("2"));
  EXPECT_EQ(Hex(c->Call(arrive, 1)), "00");  // the last one passes at once...
  EXPECT_EQ(Hex(a->Recv(1)), "00");          // ...and releases the others
  EXPECT_EQ(Hex(b->Recv(1)), "00");
  EXPECT_EQ(c->Call(V2(Op::kGet, {"/done"}), 9), Str("3"));
  // A timed-out barrier: the client sends CANCEL_WAIT and expects 01.
  ASSERT_TRUE(a->Send(Encode(Dialect::kV2, c10d_store::wire::Barrier("/lonely", 2))));
  EXPECT_EQ(Hex(a->Call(std::string("\x0c", 1), 1)), "01");
  EXPECT_EQ(server_->protocol_errors(), 0u);
}

TEST_F(SocketTest, ValueOver64MiBRoundTrips) {
  // torch's servers take it (a 65 MiB set from torch 1.13 works against them), so must we.
  Client c(server_->port());
  ASSERT_TRUE(c.connected());
  std::string value((65u << 20) + 3, '\0');
  for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 131 + (i >> 20));
  ASSERT_TRUE(c.Send(V113(Op::kSet, {"/huge"}, {value})));
  std::string got = c.Call(V113(Op::kGet, {"/huge"}), 8 + value.size());
  ASSERT_EQ(got.size(), 8 + value.size());
  EXPECT_TRUE(got == Str(value));
  EXPECT_EQ(server_->protocol_errors(), 0u);
}

TEST_F(SocketTest, BadClientsAreClosedWhileOthersCarryOn) {
  auto good = Connect2x(100);
  ASSERT_TRUE(good->Send(V2(Op::kWait, {"/later"})));  // parked across the bad clients

  struct Bad {
    const char* what;
    std::string bytes;
  };
  const std::vector<Bad> bad = {
      {"garbage", "\xff\xfe garbage"},
      {"wrong VALIDATE magic", std::string("\x00\xce\xf7\x85\x3d\x0d\x01\x00\x00", 9)},
      {"VALIDATE twice", Handshake(1) + Byte(0) + U32(c10d_store::kValidateMagic)},
      {"unknown 2.x opcode", Handshake(1) + Byte(0x40)},
      {"unknown 1.13 opcode", Byte(9)},
      {"key over the limit", Byte(2) + U64(1 << 20)},
      {"GET of a missing key", V113(Op::kGet, {"/missing"})},
      {"ADD on a non-number", V113(Op::kSet, {"/txt"}, {"abc"}) + V113(Op::kAdd, {"/txt"}, {}, 1)},
      {"MULTI_GET of a missing key (1.13 numbering has none: opcode 10 is unknown)",
       Byte(10) + U64(1) + Str("/missing")},
      {"BARRIER on a non-number", Handshake(1) + V2(Op::kSet, {"/txt2"}, {"abc"}) +
                                      Encode(Dialect::kV2, c10d_store::wire::Barrier("/txt2", 2))},
  };
  for (const Bad& b : bad) {
    Client c(server_->port());
    ASSERT_TRUE(c.connected()) << b.what;
    ASSERT_TRUE(c.Send(b.bytes)) << b.what;
    EXPECT_TRUE(c.ClosedByPeer()) << b.what;
  }
  EXPECT_EQ(server_->protocol_errors(), bad.size());

  // The good client's connection and parked WAIT survived.
  EXPECT_EQ(good->Call(V2(Op::kPing, {}, {}, 0, 5), 4), U32(5));
  auto setter = Connect2x(6);
  ASSERT_TRUE(setter->Send(V2(Op::kSet, {"/later"}, {"1"})));
  EXPECT_EQ(good->Recv(1), Byte(0));
  EXPECT_EQ(good->Call(V2(Op::kGet, {"/txt"}), 11), Str("abc"));
}

TEST_F(SocketTest, RepliesServedBeforeAnErrorAreDelivered) {
  Client c(server_->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(V113(Op::kAdd, {"/n"}, {}, 41) + V113(Op::kGetNumKeys) + "\xee"));
  EXPECT_EQ(c.Recv(16), I64(41) + I64(1));
  EXPECT_TRUE(c.ClosedByPeer());
}

TEST_F(SocketTest, ManyConnectionsAndTheirClose) {
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 500; ++i) {
    clients.push_back(std::make_unique<Client>(server_->port()));
    ASSERT_TRUE(clients.back()->connected());
  }
  for (auto& c : clients) EXPECT_EQ(c->Call(V113(Op::kAdd, {"/n"}, {}, 1), 8).size(), 8u);
  EXPECT_EQ(server_->connection_count(), 500u);
  auto last = Connect2x();
  EXPECT_EQ(last->Call(V2(Op::kAdd, {"/n"}, {}, 0), 8), I64(500));
  clients.clear();
  // Closing 500 clients at once leaves the server serving the rest.
  EXPECT_EQ(last->Call(V2(Op::kPing, {}, {}, 0, 1), 4), U32(1));
}

TEST_F(SocketTest, HoldsThousandsOfIdleConnections) {
  // Client and server ends share this process's descriptors: use what the hard limit allows.
  rlimit rl{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  getrlimit(RLIMIT_NOFILE, &rl);
  const size_t n = std::min<size_t>(5000, (rl.rlim_cur - 200) / 2);
  if (n < 500) GTEST_SKIP() << "RLIMIT_NOFILE hard limit too low: " << rl.rlim_max;
  std::vector<std::unique_ptr<Client>> clients;
  for (size_t i = 0; i < n; ++i) {
    clients.push_back(std::make_unique<Client>(server_->port()));
    ASSERT_TRUE(clients.back()->connected()) << i;
  }
  // Every one of them is served, then all are still open at once.
  for (auto& c : clients) ASSERT_EQ(c->Call(V113(Op::kGetNumKeys), 8), I64(0));
  EXPECT_EQ(server_->connection_count(), n);
  EXPECT_EQ(server_->protocol_errors(), 0u);
}

TEST_F(SocketTest, StopClosesConnectionsAndIsIdempotent) {
  auto c = Connect2x();
  ASSERT_TRUE(c->Send(V2(Op::kWait, {"/never"})));
  EXPECT_EQ(c->Call(V2(Op::kPing, {}, {}, 0, 1), 4), U32(1));
  server_->Stop();
  EXPECT_TRUE(c->ClosedByPeer());
  server_->Stop();
  EXPECT_EQ(server_->connection_count(), 0u);
}

TEST(ServerStartTest, PortInUseIsAClearError) {
  auto first = C10dStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = C10dStoreServer::Start("127.0.0.1", (*first)->port());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(second.status().message().find(std::to_string((*first)->port())),
            absl::string_view::npos)
      << second.status();
}

TEST(ServerStartTest, BadBindAddressIsAnError) {
  EXPECT_FALSE(C10dStoreServer::Start("not-an-address.invalid", 0).ok());
  EXPECT_FALSE(C10dStoreServer::Start("127.0.0.1", 70000).ok());
}

TEST(ServerStartTest, AllInterfacesServesIPv4AndIPv6) {
  auto server = C10dStoreServer::Start("", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  Client v4((*server)->port(), "127.0.0.1");
  ASSERT_TRUE(v4.connected());
  EXPECT_EQ(v4.Call(V113(Op::kAdd, {"/n"}, {}, 1), 8), I64(1));
  Client v6((*server)->port(), "::1");
  if (!v6.connected()) GTEST_SKIP() << "no IPv6 loopback here";
  EXPECT_EQ(v6.Call(V113(Op::kAdd, {"/n"}, {}, 1), 8), I64(2));
}

TEST(ServerStartTest, FreshStoresAreIndependent) {
  auto a = C10dStoreServer::Start("127.0.0.1", 0);
  auto b = C10dStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->port(), (*b)->port());
  Client ca((*a)->port()), cb((*b)->port());
  EXPECT_EQ(ca.Call(V113(Op::kAdd, {"/n"}, {}, 1), 8), I64(1));
  EXPECT_EQ(cb.Call(V113(Op::kAdd, {"/n"}, {}, 1), 8), I64(1));
}

}  // namespace
}  // namespace drun
