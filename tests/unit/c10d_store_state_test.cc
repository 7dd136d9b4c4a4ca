#include "rendezvous/store/c10d_store_state.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/unit/c10d_store_wire.h"

namespace drun {
namespace c10d_store {
namespace {

using wire::Byte;
using wire::I64;
using wire::Req;
using wire::Str;
using wire::U32;
using wire::U64;

// Records what each connection would receive.
class RecordingSink : public ReplySink {
 public:
  void Send(ConnId conn, absl::string_view bytes) override {
    got_[conn].append(bytes.data(), bytes.size());
  }
  // Returns and forgets what `conn` received so far.
  std::string Take(ConnId conn) {
    std::string s = std::move(got_[conn]);
    got_[conn].clear();
    return s;
  }

 private:
  std::map<ConnId, std::string> got_;
};

class StateTest : public ::testing::Test {
 protected:
  // Applies a request on a connection of the given dialect and expects success.
  void Do(ConnId conn, Request r, Dialect d = Dialect::kV2) {
    absl::Status s = state_.Apply(conn, d, std::move(r), sink_);
    ASSERT_TRUE(s.ok()) << s;
  }
  absl::Status Try(ConnId conn, Request r, Dialect d = Dialect::kV2) {
    return state_.Apply(conn, d, std::move(r), sink_);
  }
  std::string Take(ConnId conn) { return sink_.Take(conn); }

  C10dStoreState state_;
  RecordingSink sink_;
};

TEST_F(StateTest, SetGetAndGetOfMissingKey) {
  Do(1, Req(Op::kSet, {"/k1"}, {"v1"}));
  EXPECT_EQ(Take(1), "");  // SET has no reply
  Do(1, Req(Op::kGet, {"/k1"}));
  EXPECT_EQ(Take(1), Str("v1"));
  // torch 1.13 drops the connection on a GET of a missing key.
  EXPECT_EQ(Try(1, Req(Op::kGet, {"/nope"}), Dialect::kV113).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(Take(1), "");
  // torch's libuv server (the 2.x default) answers an empty value instead.
  Do(2, Req(Op::kGet, {"/nope"}));
  EXPECT_EQ(Take(2), U64(0));
  EXPECT_EQ(state_.num_keys(), 1u);  // and creates nothing
}

TEST_F(StateTest, BinaryValuesRoundTrip) {
  const std::string v("\0\x01\xff\0", 4);
  Do(1, Req(Op::kSet, {std::string("k\0ey", 4)}, {v}));
  Do(1, Req(Op::kGet, {std::string("k\0ey", 4)}));
  EXPECT_EQ(Take(1), Str(v));
}

TEST_F(StateTest, CompareSetCasesFromTheSpec) {
  Do(1, Req(Op::kSet, {"/k"}, {"v1"}));
  Do(1, Req(Op::kCompareSet, {"/k"}, {"v1", "v2"}));  // match: swapped
  EXPECT_EQ(Take(1), Str("v2"));
  Do(1, Req(Op::kCompareSet, {"/k"}, {"zz", "v3"}));  // mismatch: current value
  EXPECT_EQ(Take(1), Str("v2"));
  EXPECT_EQ(state_.Get("/k"), "v2");
  Do(1, Req(Op::kCompareSet, {"/new"}, {"", "n1"}));  // absent, expected empty: created
  EXPECT_EQ(Take(1), Str("n1"));
  EXPECT_EQ(state_.Get("/new"), "n1");
  Do(1, Req(Op::kCompareSet, {"/absent"}, {"x", "y"}));  // absent: the "lying" reply
  EXPECT_EQ(Take(1), Str("x"));
  EXPECT_EQ(state_.Get("/absent"), std::nullopt);
  EXPECT_EQ(state_.num_keys(), 2u);
}

TEST_F(StateTest, CompareSetCreatingAKeyWakesWaiters) {
  Do(2, Req(Op::kWait, {"/cas"}));
  EXPECT_EQ(Take(2), "");
  Do(1, Req(Op::kCompareSet, {"/cas"}, {"", "x"}));
  EXPECT_EQ(Take(1), Str("x"));
  EXPECT_EQ(Take(2), Byte(kStopWaiting));
}

TEST_F(StateTest, AddStoresAsciiDecimal) {
  Do(1, Req(Op::kAdd, {"/cnt"}, {}, 5));
  EXPECT_EQ(Take(1), I64(5));
  Do(1, Req(Op::kAdd, {"/cnt"}, {}, -2));
  EXPECT_EQ(Take(1), I64(3));
  EXPECT_EQ(state_.Get("/cnt"), "3");
  Do(1, Req(Op::kAdd, {"/neg"}, {}, -7));
  EXPECT_EQ(state_.Get("/neg"), "-7");
  Do(1, Req(Op::kAdd, {"/cnt"}, {}, 0));  // the counter-reading idiom
  EXPECT_EQ(Take(1), I64(-7) + I64(3));
}

TEST_F(StateTest, AddParsesLikeStoll) {
  Do(1, Req(Op::kSet, {"/a"}, {"  +12xyz"}));
  Do(1, Req(Op::kAdd, {"/a"}, {}, 1));
  EXPECT_EQ(Take(1), I64(13));
  Do(1, Req(Op::kSet, {"/b"}, {"-9223372036854775808"}));
  Do(1, Req(Op::kAdd, {"/b"}, {}, 0));
  EXPECT_EQ(Take(1), I64(INT64_MIN));
  // Non-numbers and out-of-range numbers make torch's server throw: connection dropped.
  for (const char* bad : {"abc", "", "-", "99999999999999999999", "9223372036854775808"}) {
    Do(1, Req(Op::kSet, {"/bad"}, {bad}));
    EXPECT_FALSE(Try(1, Req(Op::kAdd, {"/bad"}, {}, 1)).ok()) << bad;
    EXPECT_EQ(state_.Get("/bad"), bad);  // unchanged
  }
  EXPECT_EQ(Take(1), "");
}

TEST_F(StateTest, AddWrapsInsteadOfOverflowing) {
  Do(1, Req(Op::kAdd, {"/m"}, {}, INT64_MAX));
  Do(1, Req(Op::kAdd, {"/m"}, {}, 1));
  EXPECT_EQ(Take(1), I64(INT64_MAX) + I64(INT64_MIN));
}

TEST_F(StateTest, CheckReportsReadiness) {
  Do(1, Req(Op::kSet, {"/a"}, {"1"}));
  Do(1, Req(Op::kCheck, {"/a"}));
  Do(1, Req(Op::kCheck, {"/a", "/b"}));
  Do(1, Req(Op::kCheck, {}));
  EXPECT_EQ(Take(1), Byte(kCheckReady) + Byte(kCheckNotReady) + Byte(kCheckReady));
}

TEST_F(StateTest, WaitCountsMissingKeys) {
  // Spec: waiting on w1,w2, then setting w1 gives no reply, then ADD w2 gives 00.
  Do(1, Req(Op::kWait, {"/w1", "/w2"}));
  EXPECT_EQ(state_.num_parked_waits(), 1u);
  Do(2, Req(Op::kSet, {"/w1"}, {"x"}));
  EXPECT_EQ(Take(1), "");
  Do(2, Req(Op::kAdd, {"/w2"}, {}, 1));
  EXPECT_EQ(Take(1), Byte(kStopWaiting));
  EXPECT_EQ(state_.num_parked_waits(), 0u);
  // Setting a key again later does not produce a second STOP_WAITING.
  Do(2, Req(Op::kSet, {"/w1"}, {"y"}));
  EXPECT_EQ(Take(1), "");
}

TEST_F(StateTest, WaitOnPresentKeysOrNoKeysRepliesAtOnce) {
  Do(1, Req(Op::kWait, {}));
  EXPECT_EQ(Take(1), Byte(kStopWaiting));
  Do(1, Req(Op::kSet, {"/a"}, {"1"}));
  Do(1, Req(Op::kWait, {"/a", "/a"}));
  EXPECT_EQ(Take(1), Byte(kStopWaiting));
}

TEST_F(StateTest, WaitCountsOnlyKeysMissingAtWaitTime) {
  Do(2, Req(Op::kSet, {"/have"}, {"1"}));
  Do(1, Req(Op::kWait, {"/have", "/want", "/want"}));  // duplicates count once
  Do(2, Req(Op::kSet, {"/want"}, {"1"}));
  EXPECT_EQ(Take(1), Byte(kStopWaiting));
}

TEST_F(StateTest, DeleteLeavesWaitersAlone) {
  Do(1, Req(Op::kWait, {"/a", "/b"}));
  Do(2, Req(Op::kSet, {"/a"}, {"1"}));
  Do(2, Req(Op::kDeleteKey, {"/a"}));
  EXPECT_EQ(Take(2), I64(1));
  Do(2, Req(Op::kSet, {"/b"}, {"1"}));
  // /a counted when it appeared; deleting it did not re-arm it (torch's behaviour).
  EXPECT_EQ(Take(1), Byte(kStopWaiting));
}

TEST_F(StateTest, ManyWaitersOnOneKeyAreAllReleased) {
  // The store-based barrier: 1024 ranks wait on the key the last one sets.
  for (ConnId c = 100; c < 1124; ++c) {
    Do(c, Req(Op::kAdd, {"/barrier"}, {}, 1));
    EXPECT_EQ(Take(c), I64(static_cast<int64_t>(c - 99)));
    if (c < 1123) Do(c, Req(Op::kWait, {"/done"}));
  }
  EXPECT_EQ(state_.num_parked_waits(), 1023u);
  Do(1123, Req(Op::kSet, {"/done"}, {"1"}));
  for (ConnId c = 100; c < 1123; ++c) EXPECT_EQ(Take(c), Byte(kStopWaiting)) << c;
  EXPECT_EQ(state_.num_parked_waits(), 0u);
}

TEST_F(StateTest, CancelWaitRepliesCanceledAndForgetsTheWait) {
  Do(1, Req(Op::kWait, {"/never"}));
  Do(1, Req(Op::kCancelWait));
  EXPECT_EQ(Take(1), Byte(kWaitCanceled));
  EXPECT_EQ(state_.num_parked_waits(), 0u);
  Do(2, Req(Op::kSet, {"/never"}, {"1"}));
  EXPECT_EQ(Take(1), "");
  // Without a parked wait it still answers 01.
  Do(1, Req(Op::kCancelWait));
  EXPECT_EQ(Take(1), Byte(kWaitCanceled));
}

TEST_F(StateTest, StopWaitingBeforeCancelIsDeliveredFirst) {
  // The 2.x race: STOP_WAITING already sent, then the client's CANCEL_WAIT arrives.
  Do(1, Req(Op::kWait, {"/k"}));
  Do(2, Req(Op::kSet, {"/k"}, {"1"}));
  Do(1, Req(Op::kCancelWait));
  EXPECT_EQ(Take(1), Byte(kStopWaiting) + Byte(kWaitCanceled));
}

TEST_F(StateTest, Torch2ConnectionKeepsItsWaitAcrossOtherRequests) {
  Do(1, Req(Op::kWait, {"/k"}), Dialect::kV2);
  Do(1, Req(Op::kPing, {}, {}, 0, 42), Dialect::kV2);
  EXPECT_EQ(Take(1), U32(42));
  Do(2, Req(Op::kSet, {"/k"}, {"1"}));
  EXPECT_EQ(Take(1), Byte(kStopWaiting));
}

TEST_F(StateTest, Torch113NextRequestCancelsAnAbandonedWait) {
  // A 1.13 client timed out on WAIT (client side only) and moved on: its next request.
  Do(1, Req(Op::kWait, {"/late"}), Dialect::kV113);
  Do(1, Req(Op::kGetNumKeys), Dialect::kV113);
  EXPECT_EQ(Take(1), I64(0));
  EXPECT_EQ(state_.num_parked_waits(), 0u);
  // The key appearing later must not put a stray 00 in front of the next reply.
  Do(2, Req(Op::kSet, {"/late"}, {"1"}), Dialect::kV113);
  Do(1, Req(Op::kGet, {"/late"}), Dialect::kV113);
  EXPECT_EQ(Take(1), Str("1"));
}

TEST_F(StateTest, DisconnectForgetsWaitsAndWatches) {
  Do(1, Req(Op::kWait, {"/a", "/b"}));
  Do(3, Req(Op::kWatchKey, {"/a"}), Dialect::kV113);
  EXPECT_EQ(Take(3), Byte(kWatchCallbackRegistered));
  EXPECT_EQ(state_.num_watches(), 1u);
  state_.Disconnect(1);
  state_.Disconnect(3);
  EXPECT_EQ(state_.num_parked_waits(), 0u);
  EXPECT_EQ(state_.num_watches(), 0u);
  Do(2, Req(Op::kSet, {"/a"}, {"1"}));
  Do(2, Req(Op::kSet, {"/b"}, {"1"}));
  EXPECT_EQ(Take(1), "");
  EXPECT_EQ(Take(3), "");
}

TEST_F(StateTest, GetNumKeysCountsEveryKeyButNotQueues) {
  Do(1, Req(Op::kAdd, {"init/"}, {}, 1));
  Do(1, Req(Op::kSet, {"/a"}, {""}));
  Do(1, Req(Op::kQueuePush, {"/q"}, {"x"}));
  Take(1);
  Do(1, Req(Op::kGetNumKeys));
  EXPECT_EQ(Take(1), I64(2));
}

TEST_F(StateTest, DeleteKeyRepliesCount) {
  Do(1, Req(Op::kSet, {"/k1"}, {"v"}));
  Do(1, Req(Op::kDeleteKey, {"/k1"}));
  Do(1, Req(Op::kDeleteKey, {"/k1"}));
  EXPECT_EQ(Take(1), I64(1) + I64(0));
  EXPECT_EQ(state_.num_keys(), 0u);
}

std::string Event(uint8_t type, const std::string& key, const std::string& old_value,
                  const std::string& new_value) {
  return Byte(type) + Str(key) + Str(old_value) + Str(new_value);
}

TEST_F(StateTest, WatchKeyEvents) {
  const ConnId cb = 7;  // the 1.13 callback connection
  Do(cb, Req(Op::kWatchKey, {"/w"}), Dialect::kV113);
  EXPECT_EQ(Take(cb), Byte(kWatchCallbackRegistered));
  Do(cb, Req(Op::kWatchKey, {"/w"}), Dialect::kV113);  // idempotent registration
  EXPECT_EQ(Take(cb), Byte(kWatchCallbackRegistered));

  Do(1, Req(Op::kSet, {"/w"}, {"1"}), Dialect::kV113);
  EXPECT_EQ(Take(cb), Event(kWatchKeyCreated, "/w", "", "1"));
  Do(1, Req(Op::kSet, {"/w"}, {"2"}), Dialect::kV113);
  EXPECT_EQ(Take(cb), Event(kWatchKeyUpdated, "/w", "1", "2"));
  Do(1, Req(Op::kAdd, {"/w"}, {}, 3), Dialect::kV113);
  EXPECT_EQ(Take(cb), Event(kWatchKeyUpdated, "/w", "2", "5"));
  Do(1, Req(Op::kCompareSet, {"/w"}, {"nope", "x"}), Dialect::kV113);
  EXPECT_EQ(Take(cb), "");  // no change, no event
  Do(1, Req(Op::kCompareSet, {"/w"}, {"5", "x"}), Dialect::kV113);
  EXPECT_EQ(Take(cb), Event(kWatchKeyUpdated, "/w", "5", "x"));
  Do(1, Req(Op::kDeleteKey, {"/w"}), Dialect::kV113);
  EXPECT_EQ(Take(cb), Event(kWatchKeyDeleted, "/w", "x", ""));
  Do(1, Req(Op::kDeleteKey, {"/w"}), Dialect::kV113);
  EXPECT_EQ(Take(cb), "");  // nothing deleted
  Do(1, Req(Op::kAdd, {"/w"}, {}, 4), Dialect::kV113);
  EXPECT_EQ(Take(cb), Event(kWatchKeyCreated, "/w", "", "4"));
  Do(1, Req(Op::kCompareSet, {"/w"}, {"", "ignored"}), Dialect::kV113);
  EXPECT_EQ(Take(cb), "");
  Do(1, Req(Op::kAppend, {"/w"}, {"2"}));
  EXPECT_EQ(Take(cb), Event(kWatchKeyAppended, "/w", "4", "42"));
  // Other keys are not reported.
  Do(1, Req(Op::kSet, {"/other"}, {"1"}), Dialect::kV113);
  EXPECT_EQ(Take(cb), "");
}

TEST_F(StateTest, AppendConcatenatesAndWakes) {
  Do(2, Req(Op::kWait, {"/ap"}));
  Do(1, Req(Op::kAppend, {"/ap"}, {"x"}));
  EXPECT_EQ(Take(2), Byte(kStopWaiting));
  Do(1, Req(Op::kAppend, {"/ap"}, {"y"}));
  EXPECT_EQ(Take(1), "");
  EXPECT_EQ(state_.Get("/ap"), "xy");
}

TEST_F(StateTest, MultiSetAndMultiGet) {
  Do(2, Req(Op::kWait, {"/m1", "/m2"}));
  Do(1, Req(Op::kMultiSet, {"/m1", "/m2"}, {"v2", "xy"}));
  EXPECT_EQ(Take(1), "");
  EXPECT_EQ(Take(2), Byte(kStopWaiting));
  Do(1, Req(Op::kMultiGet, {"/m2", "/m1"}));
  EXPECT_EQ(Take(1), Str("xy") + Str("v2"));
  Do(1, Req(Op::kMultiGet, {}));
  EXPECT_EQ(Take(1), "");
  // A missing key: an empty value in its place on a 2.x connection (libuv server)...
  Do(1, Req(Op::kMultiGet, {"/m1", "/missing"}));
  EXPECT_EQ(Take(1), Str("v2") + U64(0));
  // ...and the connection closed on a 1.13 one, with nothing half-sent.
  EXPECT_FALSE(Try(3, Req(Op::kMultiGet, {"/m1", "/missing"}), Dialect::kV113).ok());
  EXPECT_EQ(Take(3), "");
}

TEST_F(StateTest, PingEchoesNonce) {
  Do(1, Req(Op::kValidate, {}, {}, 0, kValidateMagic));
  Do(1, Req(Op::kPing, {}, {}, 0, 0x5a71));
  EXPECT_EQ(Take(1), std::string("\x71\x5a\x00\x00", 4));
}

TEST_F(StateTest, QueuePushPopLen) {
  Do(1, Req(Op::kQueueLen, {"/q"}));
  EXPECT_EQ(Take(1), I64(0));
  Do(1, Req(Op::kQueuePop, {"/q"}));
  EXPECT_EQ(Take(1), I64(0));  // empty: the size and nothing else
  Do(1, Req(Op::kQueuePush, {"/q"}, {"a"}));
  Do(1, Req(Op::kQueuePush, {"/q"}, {"b"}));
  EXPECT_EQ(Take(1), "");
  Do(1, Req(Op::kQueueLen, {"/q"}));
  EXPECT_EQ(Take(1), I64(2));
  Do(1, Req(Op::kQueuePop, {"/q"}));
  EXPECT_EQ(Take(1), I64(2) + Str("a"));
  Do(1, Req(Op::kQueuePop, {"/q"}));
  EXPECT_EQ(Take(1), I64(1) + Str("b"));
  Do(1, Req(Op::kQueueLen, {"/q"}));
  EXPECT_EQ(Take(1), I64(0));
  EXPECT_EQ(state_.Get("/q"), std::nullopt);  // queues live beside the map
}

TEST_F(StateTest, QueuePushWakesExactlyOneBlockedPop) {
  // A blocking pop is WAIT [q] then POP.
  Do(1, Req(Op::kWait, {"/q"}));
  Do(2, Req(Op::kWait, {"/q"}));
  Do(3, Req(Op::kQueuePush, {"/q"}, {"item"}));
  EXPECT_EQ(Take(1), Byte(kStopWaiting));
  EXPECT_EQ(Take(2), "");
  Do(3, Req(Op::kQueuePush, {"/q"}, {"item2"}));
  EXPECT_EQ(Take(2), Byte(kStopWaiting));
  // A non-empty queue counts as present for CHECK and WAIT.
  Do(4, Req(Op::kCheck, {"/q"}));
  Do(4, Req(Op::kWait, {"/q"}));
  EXPECT_EQ(Take(4), Byte(kCheckReady) + Byte(kStopWaiting));
}

TEST_F(StateTest, ListKeys) {
  Do(1, Req(Op::kListKeys));
  EXPECT_EQ(Take(1), I64(0));
  Do(1, Req(Op::kSet, {"/only"}, {"1"}));
  Do(1, Req(Op::kQueuePush, {"/q"}, {"x"}));  // queues are not keys
  Do(1, Req(Op::kListKeys));
  EXPECT_EQ(Take(1), I64(1) + Str("/only"));
  // Every key, "init/" and internal ones included, each once, in no particular order.
  Do(1, Req(Op::kAdd, {"init/"}, {}, 1));
  Take(1);
  Do(1, Req(Op::kListKeys));
  const std::string got = Take(1);
  EXPECT_EQ(got.substr(0, 8), I64(2));
  EXPECT_EQ(got.size(), 8 + Str("/only").size() + Str("init/").size());
  EXPECT_NE(got.find(Str("/only")), std::string::npos);
  EXPECT_NE(got.find(Str("init/")), std::string::npos);
}

TEST_F(StateTest, BarrierReleasesEveryArrivalWhenTheLastComes) {
  Do(1, wire::Barrier("/b", 3));
  Do(2, wire::Barrier("/b", 3));
  EXPECT_EQ(Take(1), "");
  EXPECT_EQ(Take(2), "");
  EXPECT_EQ(state_.num_parked_waits(), 2u);
  EXPECT_EQ(state_.Get("/b"), "2");  // the arrivals so far, as ASCII decimal
  Do(3, wire::Barrier("/b", 3));
  EXPECT_EQ(Take(1), Byte(kStopWaiting));
  EXPECT_EQ(Take(2), Byte(kStopWaiting));
  EXPECT_EQ(Take(3), Byte(kStopWaiting));
  EXPECT_EQ(state_.num_parked_waits(), 0u);
  EXPECT_EQ(state_.Get("/b"), "3");
  // Arrivals past the world size (a reused key) pass at once.
  Do(4, wire::Barrier("/b", 3));
  EXPECT_EQ(Take(4), Byte(kStopWaiting));
  EXPECT_EQ(state_.Get("/b"), "4");
}

TEST_F(StateTest, BarrierOfOneOrLessPassesAtOnce) {
  for (int64_t world : {1, 0, -5}) {
    const std::string key = "/b" + std::to_string(world);
    Do(1, wire::Barrier(key, world));
    EXPECT_EQ(Take(1), Byte(kStopWaiting)) << world;
    EXPECT_EQ(state_.Get(key), "1");
  }
}

TEST_F(StateTest, BarrierCountsOnTopOfAdd) {
  // The key is an ordinary counter: ADD and BARRIER add to the same number, as in torch.
  Do(1, Req(Op::kAdd, {"/b"}, {}, 2));
  Take(1);
  Do(2, wire::Barrier("/b", 3));
  EXPECT_EQ(Take(2), Byte(kStopWaiting));
  EXPECT_EQ(state_.Get("/b"), "3");
  Do(1, Req(Op::kSet, {"/nan"}, {"x"}));
  EXPECT_EQ(Try(1, wire::Barrier("/nan", 2)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state_.Get("/nan"), "x");  // nothing changed, nothing sent
  EXPECT_EQ(Take(1), "");
}

TEST_F(StateTest, EarlierBarrierArrivalDoesNotReleaseAPlainWait) {
  // As torch's servers: only the last arrival (a write that wakes) releases WAITs on the key.
  Do(5, Req(Op::kWait, {"/b"}));
  Do(1, wire::Barrier("/b", 2));
  EXPECT_EQ(Take(5), "");
  Do(2, wire::Barrier("/b", 2));
  EXPECT_EQ(Take(5), Byte(kStopWaiting));
  EXPECT_EQ(Take(1), Byte(kStopWaiting));
  EXPECT_EQ(Take(2), Byte(kStopWaiting));
}

TEST_F(StateTest, AnyWriteOfTheKeyReleasesParkedArrivals) {
  // torch's servers wake everyone parked on the key at any write of it.
  Do(1, wire::Barrier("/b", 5));
  Do(2, Req(Op::kSet, {"/b"}, {"1"}));
  EXPECT_EQ(Take(1), Byte(kStopWaiting));
  EXPECT_EQ(state_.num_parked_waits(), 0u);
}

TEST_F(StateTest, BarrierTimeoutIsACancelWait) {
  // The client's barrier timeout sends CANCEL_WAIT; its arrival stays counted.
  Do(1, wire::Barrier("/b", 2));
  Do(1, Req(Op::kCancelWait));
  EXPECT_EQ(Take(1), Byte(kWaitCanceled));
  EXPECT_EQ(state_.num_parked_waits(), 0u);
  Do(2, wire::Barrier("/b", 2));
  EXPECT_EQ(Take(2), Byte(kStopWaiting));
  EXPECT_EQ(Take(1), "");
  // A closed connection's arrival is forgotten the same way.
  Do(3, wire::Barrier("/c", 2));
  state_.Disconnect(3);
  EXPECT_EQ(state_.num_parked_waits(), 0u);
}

TEST_F(StateTest, BarrierCountWrapsInsteadOfOverflowing) {
  Do(1, Req(Op::kSet, {"/b"}, {"9223372036854775807"}));
  Do(1, wire::Barrier("/b", 2));
  EXPECT_EQ(state_.Get("/b"), "-9223372036854775808");
  EXPECT_EQ(Take(1), "");  // far below 2 now: parked
  EXPECT_EQ(state_.num_parked_waits(), 1u);
}

TEST_F(StateTest, GloInitSequenceOfTwoRanks) {
  // The 1.13 agent-store init sequence of spec §6.1, both ranks interleaved.
  const std::string p = "//worker/attempt_0/default_pg/0/0/";
  for (ConnId r : {10, 20}) {
    Do(r, Req(Op::kAdd, {"init/"}, {}, 1), Dialect::kV113);
    Do(r, Req(Op::kSet, {p + "rank_" + std::to_string(r)}, {"vm"}), Dialect::kV113);
  }
  EXPECT_EQ(Take(10), I64(1));
  EXPECT_EQ(Take(20), I64(2));
  Do(10, Req(Op::kWait, {p + "rank_20"}), Dialect::kV113);
  Do(10, Req(Op::kGet, {p + "rank_20"}), Dialect::kV113);
  EXPECT_EQ(Take(10), Byte(kStopWaiting) + Str("vm"));
  Do(10, Req(Op::kWait, {p + "10"}), Dialect::kV113);  // not there yet: parked
  EXPECT_EQ(Take(10), "");
  Do(20, Req(Op::kSet, {p + "10"}, {std::string(136, 'a')}), Dialect::kV113);
  EXPECT_EQ(Take(10), Byte(kStopWaiting));
}

}  // namespace
}  // namespace c10d_store
}  // namespace drun
