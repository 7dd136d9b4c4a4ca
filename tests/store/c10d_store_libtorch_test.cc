// LibTorch 1.13's C++ c10d::TCPStore client against an in-process C10dStoreServer.
// C++ is the only 1.13 client with check() and watchKey() (spec §7).
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "rendezvous/base/mutex.h"
#include "rendezvous/store/c10d_store.h"

namespace drun {
namespace {

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string Text(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }

class LibTorchClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = C10dStoreServer::Start("127.0.0.1", 0);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  std::unique_ptr<::c10d::TCPStore> Client() {
    ::c10d::TCPStoreOptions opts;
    opts.port = static_cast<uint16_t>(server_->port());
    opts.isServer = false;
    opts.numWorkers = 1;
    opts.timeout = std::chrono::seconds(30);
    return std::make_unique<::c10d::TCPStore>("127.0.0.1", opts);
  }
  std::unique_ptr<C10dStoreServer> server_;
};

TEST_F(LibTorchClientTest, Check) {
  auto store = Client();
  EXPECT_FALSE(store->check({"k"}));
  store->set("k", Bytes("v"));
  EXPECT_TRUE(store->check({"k"}));
  EXPECT_FALSE(store->check({"k", "missing"}));
  EXPECT_TRUE(store->check({}));
}

TEST_F(LibTorchClientTest, KeyValueOps) {
  auto store = Client();
  store->set("k", Bytes("v1"));
  EXPECT_EQ(Text(store->get("k")), "v1");
  EXPECT_EQ(Text(store->compareSet("k", Bytes("v1"), Bytes("v2"))), "v2");
  EXPECT_EQ(Text(store->compareSet("absent", Bytes("x"), Bytes("y"))), "x");
  EXPECT_EQ(store->add("n", 5), 5);
  EXPECT_EQ(store->add("n", -2), 3);
  EXPECT_EQ(Text(store->get("n")), "3");
  EXPECT_EQ(store->getNumKeys(), 3);  // init/, /k, /n
  EXPECT_TRUE(store->deleteKey("k"));
  EXPECT_FALSE(store->deleteKey("k"));
  EXPECT_THROW(store->wait({"never"}, std::chrono::milliseconds(100)), std::exception);
  store->wait({"n"});
}

TEST_F(LibTorchClientTest, PrefixStoreJoinsKeys) {
  auto store = Client();
  ::c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(server_->port());
  opts.timeout = std::chrono::seconds(30);
  ::c10d::PrefixStore prefixed("pfx", c10::make_intrusive<::c10d::TCPStore>("127.0.0.1", opts));
  prefixed.set("k", Bytes("v"));
  EXPECT_EQ(Text(store->get("pfx/k")), "v");
}

// Collects watchKey callbacks, which arrive on the client's callback thread.
class Events {
 public:
  void Add(c10::optional<std::string> old_value, c10::optional<std::string> new_value) {
    drun::MutexLock lock(&mu_);
    events_.push_back(std::string(old_value ? "'" + *old_value + "'" : "None") + "->" +
                      (new_value ? "'" + *new_value + "'" : "None"));
    cv_.SignalAll();
  }
  // Waits (bounded) until n events arrived; returns them.
  std::vector<std::string> WaitFor(size_t n) {
    drun::MutexLock lock(&mu_);
    const auto deadline = drun::Clock::now() + std::chrono::seconds(20);
    while (events_.size() < n && cv_.WaitUntil(&mu_, deadline)) {
    }
    return events_;
  }

 private:
  drun::Mutex mu_;
  drun::CondVar cv_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
};

TEST_F(LibTorchClientTest, WatchKeyReportsCreateUpdateDelete) {
  auto watcher = Client();
  auto writer = Client();
  Events events;
  // watchKey returns once the server answered KEY_CALLBACK_REGISTERED on the callback
  // connection.
  watcher->watchKey("w", [&](c10::optional<std::string> o, c10::optional<std::string> n) {
    events.Add(std::move(o), std::move(n));
  });
  writer->set("w", Bytes("1"));
  EXPECT_EQ(events.WaitFor(1), std::vector<std::string>({"None->'1'"}));
  writer->set("w", Bytes("2"));
  writer->add("w", 3);
  writer->deleteKey("w");
  EXPECT_EQ(events.WaitFor(4),
            std::vector<std::string>({"None->'1'", "'1'->'2'", "'2'->'5'", "'5'->None"}));
}

}  // namespace
}  // namespace drun
