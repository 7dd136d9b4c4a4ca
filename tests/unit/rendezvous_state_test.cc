// Every transition of the rendezvous state machine, without sockets or sleeps:
// time is a value the test advances.
#include "rendezvous/rendezvous_state.h"

#include <csignal>
#include <deque>

#include "rendezvous/join_auth.h"
#include "rendezvous/link_liveness.h"

#include <gtest/gtest.h>

namespace drun {
namespace {

using std::chrono::seconds;
using Outbox = RendezvousState::Outbox;

class RendezvousStateTest : public ::testing::Test {
 protected:
  RendezvousState::Config Config(int min, int max, int restarts = 0) {
    RendezvousState::Config c;
    c.min_nodes = min;
    c.max_nodes = max;
    c.max_restarts = restarts;
    c.run_id = "job1";
    c.last_call_timeout = seconds(30);
    c.join_timeout = seconds(600);
    return c;
  }
  // `nodes` fixed, 3 restarts, silence lost after 3 s, the last runner's after 20 s.
  RendezvousState::Config LastRunnerConfig(int nodes) {
    auto c = Config(nodes, nodes, 3);
    c.keepalive_timeout = seconds(3);
    c.last_runner_silence = seconds(20);
    return c;
  }
  v1::Hello Hello(const std::string& host, int nproc = 2, int rank = -1) {
    v1::Hello h;
    h.set_run_id("job1");
    h.set_hostname(host);
    h.set_local_world_size(nproc);
    h.set_requested_node_rank(rank);
    return h;
  }
  // Hello + Join, returning everything sent.
  Outbox Arrive(RendezvousState& s, uint64_t id, const std::string& host, int nproc = 2,
                int port = 1000) {
    Outbox out = s.OnHello(id, Hello(host, nproc), "10.0.0." + std::to_string(id), now);
    Outbox j = s.OnJoin(id, port + static_cast<int>(id), now);
    out.insert(out.end(), j.begin(), j.end());
    return out;
  }
  static std::vector<const v1::ServerMessage*> For(const Outbox& out, uint64_t id,
                                                  v1::ServerMessage::KindCase kind) {
    std::vector<const v1::ServerMessage*> r;
    for (const auto& o : out) {
      if (o.node == id && o.msg.kind_case() == kind) r.push_back(&o.msg);
    }
    return r;
  }
  static int Count(const Outbox& out, v1::ServerMessage::KindCase kind) {
    int n = 0;
    for (const auto& o : out) n += o.msg.kind_case() == kind;
    return n;
  }
  v1::Failure Fail(int rank, int code, int signal = 0) {
    v1::Failure f;
    f.set_host("h");
    f.set_rank(rank);
    f.set_exit_code(code);
    f.set_signal(signal);
    return f;
  }
  TimePoint now = TimePoint() + seconds(1000);
};

constexpr auto kAssign = v1::ServerMessage::kAssignment;
constexpr auto kStop = v1::ServerMessage::kStop;
constexpr auto kFinish = v1::ServerMessage::kFinish;
constexpr auto kReject = v1::ServerMessage::kReject;
constexpr auto kWaiting = v1::ServerMessage::kWaiting;

TEST_F(RendezvousStateTest, SingleNodeClosesAtOnce) {
  RendezvousState s(Config(1, 1));
  Outbox out = Arrive(s, 1, "a", 4);
  auto a = For(out, 1, kAssign);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0]->assignment().round(), 0);
  EXPECT_EQ(a[0]->assignment().group_rank(), 0);
  EXPECT_EQ(a[0]->assignment().world_size(), 4);
  EXPECT_EQ(a[0]->assignment().master_addr(), "10.0.0.1");
  EXPECT_EQ(a[0]->assignment().master_port(), 1001);
}

TEST_F(RendezvousStateTest, ClosesAtMaxWithRankOffsetsAddingUp) {
  RendezvousState s(Config(3, 3));
  Arrive(s, 1, "a", 2);
  Arrive(s, 2, "b", 3);
  Outbox out = Arrive(s, 3, "c", 1);
  ASSERT_EQ(Count(out, kAssign), 3);
  EXPECT_EQ(For(out, 1, kAssign)[0]->assignment().rank_offset(), 0);
  EXPECT_EQ(For(out, 2, kAssign)[0]->assignment().rank_offset(), 2);
  EXPECT_EQ(For(out, 3, kAssign)[0]->assignment().rank_offset(), 5);
  for (uint64_t id : {1, 2, 3}) {
    EXPECT_EQ(For(out, id, kAssign)[0]->assignment().world_size(), 6);
    EXPECT_EQ(For(out, id, kAssign)[0]->assignment().group_world_size(), 3);
    EXPECT_EQ(For(out, id, kAssign)[0]->assignment().master_addr(), "10.0.0.1");
  }
}

TEST_F(RendezvousStateTest, ClosesAtMinOnlyAfterLastCall) {
  RendezvousState s(Config(2, 4));
  Arrive(s, 1, "a");
  Outbox out = Arrive(s, 2, "b");
  EXPECT_EQ(Count(out, kAssign), 0);
  ASSERT_TRUE(s.NextDeadline().has_value());
  EXPECT_EQ(*s.NextDeadline(), now + seconds(30));
  EXPECT_EQ(Count(s.OnTick(now + seconds(29)), kAssign), 0);
  out = s.OnTick(now + seconds(30));
  EXPECT_EQ(Count(out, kAssign), 2);
}

TEST_F(RendezvousStateTest, LastCallResetsWhenBelowMinAgain) {
  RendezvousState s(Config(2, 4));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  s.OnLost(2, now + seconds(10));
  EXPECT_EQ(Count(s.OnTick(now + seconds(31)), kAssign), 0);
}

TEST_F(RendezvousStateTest, WorkerFailureRestartsEveryNodeWithSameCount) {
  RendezvousState s(Config(2, 2, 3));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  Outbox out = s.OnFailed(2, 0, Fail(3, 7), now);
  EXPECT_EQ(For(out, 1, kStop).size(), 1u);
  EXPECT_EQ(For(out, 2, kStop).size(), 1u);
  EXPECT_EQ(s.restarts_used(), 1);
  // A second failure report of the same round is a consequence, not a cause.
  EXPECT_TRUE(s.OnFailed(1, 0, Fail(0, 1), now).empty());
  EXPECT_TRUE(s.OnJoin(1, 5, now).empty() || Count(s.OnJoin(1, 5, now), kAssign) == 0);
  out = s.OnJoin(2, 6, now);
  ASSERT_EQ(Count(out, kAssign), 2);
  for (const auto& o : out) EXPECT_EQ(o.msg.assignment().restart_count(), 1);
  EXPECT_EQ(For(out, 1, kAssign)[0]->assignment().round(), 1);
}

TEST_F(RendezvousStateTest, BudgetExhaustedFinishesWithWorkerExitCode) {
  RendezvousState s(Config(2, 2, 1));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  s.OnFailed(1, 0, Fail(0, 3), now);
  s.OnJoin(1, 1, now);
  s.OnJoin(2, 2, now);
  Outbox out = s.OnFailed(2, 1, Fail(2, 0, 11), now);  // exit code 0 + signal: treat as 1
  EXPECT_EQ(Count(out, kStop), 2);  // every node stops first
  EXPECT_EQ(Count(out, kFinish), 0);
  EXPECT_EQ(Count(s.OnJoin(1, 1, now), kFinish), 0);
  out = s.OnJoin(2, 2, now);
  ASSERT_EQ(Count(out, kFinish), 2);
  for (const auto& o : out) {
    EXPECT_EQ(o.msg.finish().exit_code(), 1);
    EXPECT_EQ(o.msg.finish().failure().rank(), 2);
  }
  EXPECT_TRUE(s.finished());
}

TEST_F(RendezvousStateTest, FailureWithoutBudgetFinishesAtOnce) {
  RendezvousState s(Config(1, 1, 0));
  Arrive(s, 1, "a");
  Outbox out = s.OnFailed(1, 0, Fail(0, 139, 11), now);
  ASSERT_EQ(Count(out, kStop), 1);
  out = s.OnJoin(1, 1, now);
  ASSERT_EQ(Count(out, kFinish), 1);
  EXPECT_EQ(out[0].msg.finish().exit_code(), 139);
  EXPECT_NE(out[0].msg.finish().message().find("SIGSEGV"), std::string::npos);
}

TEST_F(RendezvousStateTest, EarliestFailureOfTheLastRoundIsTheRootCause) {
  RendezvousState s(Config(2, 2, 0));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  v1::Failure consequence = Fail(0, 1);
  consequence.set_time_unix_s(100.5);
  v1::Failure cause = Fail(3, 3);
  cause.set_time_unix_s(100.2);
  s.OnFailed(1, 0, consequence, now);  // arrives first, happened later
  EXPECT_TRUE(s.OnFailed(2, 0, cause, now).empty());
  s.OnJoin(1, 1, now);
  Outbox out = s.OnJoin(2, 2, now);
  ASSERT_EQ(Count(out, kFinish), 2);
  for (const auto& o : out) {
    EXPECT_EQ(o.msg.finish().exit_code(), 3);
    EXPECT_EQ(o.msg.finish().failure().rank(), 3);
  }
}

TEST_F(RendezvousStateTest, FinishWaitsForLostNodesToo) {
  RendezvousState s(Config(2, 2, 0));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  s.OnFailed(1, 0, Fail(0, 4), now);
  s.OnJoin(1, 1, now);
  Outbox out = s.OnLost(2, now);
  ASSERT_EQ(Count(out, kFinish), 1);
  EXPECT_EQ(out[0].msg.finish().exit_code(), 4);
}

TEST_F(RendezvousStateTest, AllSucceededFinishesZero) {
  RendezvousState s(Config(2, 2));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  // The first success while the other node runs: only that node hears it counted.
  Outbox first = s.OnSucceeded(1, 0, now);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(For(first, 1, kWaiting).size(), 1u);
  EXPECT_EQ(For(first, 1, kWaiting)[0]->waiting().kind(), v1::Waiting::FINISHED);
  Outbox out = s.OnSucceeded(2, 0, now);
  ASSERT_EQ(Count(out, kFinish), 2);
  EXPECT_EQ(out[0].msg.finish().exit_code(), 0);
}

TEST_F(RendezvousStateTest, StaleRoundReportsAreIgnored) {
  RendezvousState s(Config(1, 1, 2));
  Arrive(s, 1, "a");
  s.OnFailed(1, 0, Fail(0, 1), now);
  s.OnJoin(1, 1, now);
  EXPECT_TRUE(s.OnSucceeded(1, 0, now).empty());
  EXPECT_TRUE(s.OnFailed(1, 0, Fail(0, 1), now).empty());
  EXPECT_EQ(s.restarts_used(), 1);
}

TEST_F(RendezvousStateTest, JoinBelowMaxRestartsForFree) {
  RendezvousState s(Config(2, 3, 0));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  s.OnTick(now + seconds(30));
  Outbox out = Arrive(s, 3, "c");
  EXPECT_EQ(Count(out, kStop), 2);
  s.OnJoin(1, 1, now);
  out = s.OnJoin(2, 2, now);
  ASSERT_EQ(Count(out, kAssign), 3);
  EXPECT_EQ(For(out, 1, kAssign)[0]->assignment().world_size(), 6);
  EXPECT_EQ(For(out, 3, kAssign)[0]->assignment().group_rank(), 2);
  EXPECT_EQ(For(out, 3, kAssign)[0]->assignment().restart_count(), 0);
  EXPECT_EQ(s.restarts_used(), 0);
}

// Agents decide on Waiting.kind (an enum), never on its text.
TEST_F(RendezvousStateTest, WaitingSaysWhyAsAnEnum) {
  RendezvousState s(Config(2, 3, 0));
  Outbox out = Arrive(s, 1, "a");
  ASSERT_EQ(For(out, 1, kWaiting).size(), 1u);
  EXPECT_EQ(For(out, 1, kWaiting)[0]->waiting().kind(), v1::Waiting::WAITING_FOR_NODES);
  EXPECT_EQ(For(out, 1, kWaiting)[0]->waiting().reason(), "waiting for nodes");
  out = Arrive(s, 2, "b");
  auto last_call = For(out, 1, kWaiting);
  ASSERT_EQ(last_call.size(), 1u);
  EXPECT_EQ(last_call[0]->waiting().kind(), v1::Waiting::LAST_CALL);
  Arrive(s, 3, "c");  // closes at max
  out = Arrive(s, 4, "spare");
  ASSERT_EQ(For(out, 4, kWaiting).size(), 1u);
  EXPECT_EQ(For(out, 4, kWaiting)[0]->waiting().kind(), v1::Waiting::SPARE);
}

TEST_F(RendezvousStateTest, SpareAtMaxTakesOverLostNodeKeepingRanks) {
  RendezvousState s(Config(2, 3, 0));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  Arrive(s, 3, "c");  // closes at max
  Outbox out = Arrive(s, 4, "spare");
  EXPECT_EQ(For(out, 4, kWaiting).size(), 1u);
  EXPECT_EQ(Count(out, kStop), 0);
  out = s.OnLost(2, now);
  EXPECT_EQ(Count(out, kStop), 2);
  s.OnJoin(1, 1, now);
  out = s.OnJoin(3, 3, now);
  ASSERT_EQ(Count(out, kAssign), 3);
  EXPECT_EQ(For(out, 1, kAssign)[0]->assignment().group_rank(), 0);
  EXPECT_EQ(For(out, 3, kAssign)[0]->assignment().group_rank(), 1);
  EXPECT_EQ(For(out, 4, kAssign)[0]->assignment().group_rank(), 2);
}

TEST_F(RendezvousStateTest, LostNodeBelowMinWaitsThenTimesOut) {
  RendezvousState s(Config(2, 2, 0));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  s.OnLost(2, now);
  Outbox out = s.OnJoin(1, 1, now + seconds(1));
  EXPECT_EQ(Count(out, kAssign), 0);
  EXPECT_EQ(Count(s.OnTick(now + seconds(600)), kFinish), 0);
  out = s.OnTick(now + seconds(601));
  ASSERT_EQ(Count(out, kFinish), 1);
  EXPECT_EQ(out[0].msg.finish().exit_code(), 1);
  EXPECT_NE(out[0].msg.finish().message().find("1 of at least 2"), std::string::npos);
}

TEST_F(RendezvousStateTest, LostNodeAboveMinContinuesSmaller) {
  RendezvousState s(Config(2, 3, 0));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  Arrive(s, 3, "c");
  s.OnLost(1, now);
  s.OnJoin(2, 2, now);
  Outbox out = s.OnJoin(3, 3, now);
  ASSERT_EQ(Count(out, kAssign), 2);
  EXPECT_EQ(For(out, 2, kAssign)[0]->assignment().group_rank(), 0);
  EXPECT_EQ(For(out, 2, kAssign)[0]->assignment().world_size(), 4);
  EXPECT_EQ(For(out, 2, kAssign)[0]->assignment().master_addr(), "10.0.0.2");
}

TEST_F(RendezvousStateTest, StopNamesTheNodeByRankAndAddressAndSaysWhyItLeft) {
  // Three agents on one machine: the name alone would not tell which one went.
  RendezvousState s(Config(2, 3, 0));
  Arrive(s, 1, "vm");
  Arrive(s, 2, "vm");
  Arrive(s, 3, "vm");
  Outbox out = s.OnLost(2, now);
  ASSERT_EQ(For(out, 1, kStop).size(), 1u);
  EXPECT_EQ(For(out, 1, kStop)[0]->stop().reason(), "host vm was lost (node rank 1, 10.0.0.2)");
  s.OnJoin(1, 1, now);
  out = s.OnJoin(3, 3, now);
  ASSERT_EQ(Count(out, kAssign), 2);
  // A node stopping on a signal says so first: its end is named as that stop.
  s.OnLeaving(3, SIGINT, now);
  out = s.OnLost(3, now);
  ASSERT_EQ(For(out, 1, kStop).size(), 1u);
  EXPECT_EQ(For(out, 1, kStop)[0]->stop().reason(),
            "host vm stopped on SIGINT (node rank 1, 10.0.0.3)");
}

// Ticks the way the server's timer does: at every deadline, from `from` to
// `to`; returns everything sent.
static Outbox TickThrough(RendezvousState& s, TimePoint to) {
  Outbox all;
  while (auto next = s.NextDeadline()) {
    if (*next > to) break;
    Outbox o = s.OnTick(*next);
    all.insert(all.end(), o.begin(), o.end());
  }
  return all;
}

TEST_F(RendezvousStateTest, KeepaliveExpiryLosesSilentNode) {
  auto c = Config(2, 2);
  c.keepalive_timeout = seconds(3);
  RendezvousState s(c);
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  // Sweeps are due every sweep_period while nodes are watched.
  ASSERT_TRUE(s.NextDeadline().has_value());
  EXPECT_EQ(*s.NextDeadline(), now + c.sweep_period);
  EXPECT_EQ(Count(TickThrough(s, now + seconds(2)), kStop), 0);
  s.OnHeartbeat(1, now + seconds(2));
  // Node 2 has been silent for 3 s at now+3 s: lost at the first sweep after.
  EXPECT_EQ(Count(TickThrough(s, now + seconds(3)), kStop), 0);
  EXPECT_EQ(s.num_nodes(), 2);
  Outbox out = TickThrough(s, now + seconds(3) + c.sweep_period);
  EXPECT_EQ(For(out, 1, kStop).size(), 1u);
  // The silent node is told, should it wake up: it is out of the job.
  ASSERT_EQ(For(out, 2, kReject).size(), 1u);
  EXPECT_NE(For(out, 2, kReject)[0]->reject().message().find("nothing came from this node for 3 s"),
            std::string::npos);
  EXPECT_EQ(s.num_nodes(), 1);
  EXPECT_EQ(s.stalled(), Duration::zero());
}

// The last runner (every other node of the round succeeded) is borne
// last_runner_silence: a frozen agent whose workers finished meanwhile reports
// when it wakes, and the job ends at 0 without rerunning the finished nodes.
TEST_F(RendezvousStateTest, TheLastRunnersSilenceIsBorneLongerAndItsLateSuccessFinishes) {
  auto c = LastRunnerConfig(3);
  RendezvousState s(c);
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  Arrive(s, 3, "c");
  // Nodes 1 and 2 succeed and keep their heartbeats; node 3 goes silent.
  s.OnSucceeded(1, 0, now + seconds(1));
  s.OnSucceeded(2, 0, now + seconds(1));
  Outbox said;
  for (int t = 2; t <= 19; ++t) {
    s.OnHeartbeat(1, now + seconds(t));
    s.OnHeartbeat(2, now + seconds(t));
    Outbox out = TickThrough(s, now + seconds(t));
    EXPECT_EQ(Count(out, kStop), 0) << "at " << t << " s";
    EXPECT_EQ(Count(out, kReject), 0) << "at " << t << " s";
    said.insert(said.end(), out.begin(), out.end());
  }
  EXPECT_EQ(s.num_nodes(), 3);
  // The wait is said once, past the usual bound, by the finished node of the lowest rank.
  ASSERT_EQ(said.size(), 1u);
  ASSERT_EQ(For(said, 1, kWaiting).size(), 1u);
  const v1::Waiting& w = For(said, 1, kWaiting)[0]->waiting();
  EXPECT_EQ(w.kind(), v1::Waiting::LAST_RUNNER_SILENT);
  EXPECT_EQ(w.reason(), "host c is silent (node rank 2, 10.0.0.3): 3 s now, and every other node has finished; "
                        "its word decides the job: waiting up to 20 s for it, then the round restarts");
  // It wakes after 19 s of silence and reports: the job is done, round 0.
  Outbox out = s.OnSucceeded(3, 0, now + seconds(19));
  ASSERT_EQ(Count(out, kFinish), 3);
  EXPECT_EQ(For(out, 3, kFinish)[0]->finish().exit_code(), 0);
  EXPECT_EQ(s.round(), 0);
}

TEST_F(RendezvousStateTest, TheLastRunnerSilentPastItsBoundIsLostAndTheRoundRestarts) {
  auto c = LastRunnerConfig(2);
  RendezvousState s(c);
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  s.OnSucceeded(1, 0, now + seconds(1));
  for (int t = 2; t <= 20; ++t) s.OnHeartbeat(1, now + seconds(t));
  EXPECT_EQ(Count(TickThrough(s, now + seconds(20)), kStop), 0);
  Outbox out = TickThrough(s, now + seconds(20) + c.sweep_period);
  ASSERT_EQ(For(out, 2, kReject).size(), 1u);
  EXPECT_NE(For(out, 2, kReject)[0]->reject().message().find("nothing came from this node for 20 s"),
            std::string::npos);
  EXPECT_EQ(For(out, 1, kStop).size(), 1u);
  EXPECT_EQ(s.num_nodes(), 1);
}

TEST_F(RendezvousStateTest, ARunnerWithAnotherRunnerBesideItHasTheUsualBound) {
  // Two nodes still run: neither is the last runner, so silence is lost at 3 s.
  auto c = LastRunnerConfig(3);
  RendezvousState s(c);
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  Arrive(s, 3, "c");
  s.OnSucceeded(1, 0, now);
  s.OnHeartbeat(1, now + seconds(2));
  s.OnHeartbeat(2, now + seconds(2));
  Outbox out = TickThrough(s, now + seconds(3) + c.sweep_period);
  EXPECT_EQ(For(out, 3, kReject).size(), 1u);
  EXPECT_EQ(For(out, 2, kStop).size(), 1u);
}

TEST_F(RendezvousStateTest, ServerStallIsNobodysSilence) {
  // The server itself did not run for 5 s (its tick came 5 s late): the
  // nodes' messages of that time may be waiting unread, so the stall is not
  // counted as their silence.
  auto c = Config(2, 2);
  c.keepalive_timeout = seconds(2);
  RendezvousState s(c);
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  TickThrough(s, now + seconds(1));
  const TimePoint late = now + seconds(6);
  Outbox out = s.OnTick(late);
  EXPECT_EQ(Count(out, kStop), 0);
  EXPECT_EQ(s.num_nodes(), 2);
  EXPECT_GE(s.stalled(), seconds(4));
  // Back to regular ticks: node 1 speaks, node 2 stays silent. Its silence
  // is the 1.1 s before the stall plus the time after it (the 50-ms stall
  // tolerance counts as silence too): 2 s are up 0.85 s after the late tick.
  s.OnHeartbeat(1, late + std::chrono::milliseconds(500));
  out = TickThrough(s, late + std::chrono::milliseconds(800));
  EXPECT_EQ(Count(out, kStop), 0);
  EXPECT_EQ(s.num_nodes(), 2);
  out = TickThrough(s, late + std::chrono::milliseconds(900));
  EXPECT_EQ(For(out, 1, kStop).size(), 1u);
  EXPECT_EQ(s.num_nodes(), 1);
}

// A server that did not run for 10x the keep-alive timeout (its tick came
// 30 s late) loses no node; a node silent after it is still lost once its
// own silence passes the timeout.
TEST_F(RendezvousStateTest, AStallOfTenTimeoutsLosesNoNodeButASilentNodeIsStillLost) {
  auto c = Config(2, 2);
  c.keepalive_timeout = seconds(3);
  RendezvousState s(c);
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  TickThrough(s, now + seconds(1));
  const TimePoint late = now + seconds(31);
  Outbox out = s.OnTick(late);
  EXPECT_EQ(Count(out, kStop) + Count(out, kReject), 0);
  EXPECT_EQ(s.num_nodes(), 2);
  // Node 1 speaks, node 2 never: 1.1 s of silence before the stall (to the
  // tick then due), its 50-ms tolerance, then 1.85 s more are the 3 s.
  s.OnHeartbeat(1, late + seconds(1));
  out = TickThrough(s, late + std::chrono::milliseconds(1800));
  EXPECT_EQ(Count(out, kStop) + Count(out, kReject), 0);
  s.OnHeartbeat(1, late + std::chrono::milliseconds(1850));
  out = TickThrough(s, late + std::chrono::milliseconds(1900));
  EXPECT_EQ(For(out, 2, kReject).size(), 1u);
  EXPECT_EQ(For(out, 1, kStop).size(), 1u);
  EXPECT_EQ(s.num_nodes(), 1);
}

// The server's backlog is nobody's silence. Four nodes send a stamped
// heartbeat every second of their own clocks. The server handles their first
// ones at once, then one message a second, in the order they were sent: a
// node is heard only every 4 s of the server's clock (past its 3-s timeout),
// and the backlog grows to more than 10x the timeout. No node is lost. Node 4
// stops after its heartbeat of 14 s (a stuck process): once the others'
// heartbeats sent at 18 s are handled, it has been silent 4 s on the senders'
// clock and is lost, and only it.
TEST_F(RendezvousStateTest, TheServersBacklogIsNobodysSilenceButAStuckNodeIsStillLost) {
  auto c = Config(4, 4);
  c.keepalive_timeout = seconds(3);
  RendezvousState s(c);
  for (uint64_t id = 1; id <= 4; ++id) Arrive(s, id, std::string(1, static_cast<char>('a' + id - 1)));
  // Each agent's steady clock has an epoch of its own.
  auto stamp = [](uint64_t id, int sent_s) { return Duration(seconds(7 * id + 100 + sent_s)); };
  for (uint64_t id = 1; id <= 4; ++id) s.OnHeartbeat(id, now + seconds(1), stamp(id, 1));
  std::deque<std::pair<uint64_t, int>> queue;  // (node, sent at), in the order sent
  for (int sent = 2; sent <= 30; ++sent) {
    for (uint64_t id = 1; id <= 4; ++id) {
      if (id != 4 || sent <= 14) queue.emplace_back(id, sent);
    }
  }
  Duration most_behind = Duration::zero();
  int handled_up_to = 1;  // the latest send time handled
  for (int k = 2; !queue.empty(); ++k) {
    const TimePoint t = now + seconds(k);
    Outbox out = TickThrough(s, t);
    if (handled_up_to <= 17) {
      ASSERT_EQ(Count(out, kStop) + Count(out, kReject), 0) << "at " << k << " s";
    } else {
      EXPECT_EQ(For(out, 4, kReject).size(), 1u);
      EXPECT_EQ(Count(out, kReject), 1);
      EXPECT_EQ(For(out, 1, kStop).size(), 1u);
      break;
    }
    const auto [id, sent] = queue.front();
    queue.pop_front();
    s.OnHeartbeat(id, t, stamp(id, sent));
    handled_up_to = sent;
    most_behind = std::max(most_behind, s.Behind(t));
  }
  EXPECT_EQ(handled_up_to, 18);
  EXPECT_GE(most_behind, 10 * c.keepalive_timeout);
  EXPECT_EQ(s.num_nodes(), 3);
}

// With keep-alives checked, every accepted node is told the job's pace.
TEST_F(RendezvousStateTest, AnAcceptedNodeIsToldThePace) {
  auto c = Config(1, 2);
  c.keepalive_timeout = seconds(60);
  c.heartbeat = seconds(15);
  RendezvousState s(c);
  Outbox out = s.OnHello(1, Hello("a"), "10.0.0.1", now);
  ASSERT_EQ(For(out, 1, v1::ServerMessage::kPace).size(), 1u);
  const v1::Pace& p = For(out, 1, v1::ServerMessage::kPace)[0]->pace();
  EXPECT_EQ(p.heartbeat_ms(), 15000);
  EXPECT_EQ(p.silence_ms(), 60000);
  // A refused Hello is told nothing but why.
  out = s.OnHello(2, Hello("b", 2, 5), "10.0.0.2", now);
  EXPECT_EQ(Count(out, v1::ServerMessage::kPace), 0);
  // The in-process rendezvous checks no keep-alives: no pace.
  RendezvousState local(Config(1, 1));
  EXPECT_EQ(Count(local.OnHello(1, Hello("a"), "127.0.0.1", now), v1::ServerMessage::kPace), 0);
}

// The pace follows the job's size: all heartbeats together stay within
// kHeartbeatsPerSecond; silence is 4 heartbeats and at least 10 x the link
// timeout (10 s at least).
TEST(PaceTest, ThePaceFollowsTheJobsSize) {
  using std::chrono::milliseconds;
  const milliseconds link(2000);
  for (int nodes : {1, 4, 1024, 10000}) {
    EXPECT_EQ(PaceFor(link, nodes).heartbeat, milliseconds(5000)) << nodes;
    EXPECT_EQ(PaceFor(link, nodes).silence, milliseconds(20000)) << nodes;
  }
  EXPECT_EQ(PaceFor(link, 30000).heartbeat, milliseconds(15000));
  EXPECT_EQ(PaceFor(link, 30000).silence, milliseconds(60000));
  EXPECT_EQ(PaceFor(link, 100000).heartbeat, milliseconds(50000));
  EXPECT_EQ(PaceFor(link, 100000).silence, milliseconds(200000));
  EXPECT_EQ(PaceFor(milliseconds(15000), 4).silence, milliseconds(150000));  // 5 s x 3
  EXPECT_EQ(PaceFor(milliseconds(500), 4).silence, milliseconds(10000));
  for (int nodes : {1, 4, 1024, 10000, 30000, 100000, 1000000}) {
    const auto p = PaceFor(link, nodes);
    EXPECT_LE(nodes * 1000.0 / p.heartbeat.count(), kHeartbeatsPerSecond) << nodes;
  }
}

TEST_F(RendezvousStateTest, SweepsStopWithNoNodesAndRestartWithoutStall) {
  auto c = Config(1, 2);
  c.keepalive_timeout = seconds(2);
  c.last_call_timeout = seconds(1000);
  c.join_timeout = seconds(100000);
  RendezvousState s(c);
  Arrive(s, 1, "a");
  s.OnLost(1, now);
  TickThrough(s, now + seconds(1));
  // No node to watch: no sweep is due, only the join timeout.
  ASSERT_TRUE(s.NextDeadline().has_value());
  EXPECT_GT(*s.NextDeadline(), now + seconds(1000));
  // A node arriving an hour later is not taken for a stalled server.
  now += std::chrono::hours(1);
  Arrive(s, 2, "b");
  TickThrough(s, now + seconds(1));
  EXPECT_EQ(s.stalled(), Duration::zero());
  EXPECT_EQ(s.num_nodes(), 1);
}

// The agent's side of a stream whose Challenge carried `challenge`: its
// Hello, proven with `token` (job_auth.h), as the gRPC client sends it.
v1::Hello Proven(v1::Hello h, AgentHandshake* agent, const std::string& challenge) {
  v1::Challenge c;
  c.set_nonce(challenge);
  agent->OnChallenge(c);
  agent->Answer(&h);
  return h;
}

TEST_F(RendezvousStateTest, RejectsWrongRunIdTokenAndDuplicateRank) {
  auto c = Config(2, 2);
  c.token = "secret";
  c.token_authority = MakeTokenAuthority(c.token, c.run_id);
  RendezvousState s(c);
  const std::string challenge = NewNonce();
  AgentHandshake right("secret"), wrong("nope");
  v1::Hello h = Proven(Hello("a"), &right, challenge);
  v1::Hello wrong_id = h;
  wrong_id.set_run_id("other");
  Outbox out = s.OnHello(1, wrong_id, "x", now, challenge);
  ASSERT_EQ(Count(out, kReject), 1);
  EXPECT_NE(out[0].msg.reject().message().find("run id 'other'"), std::string::npos);
  v1::Hello wrong_token = Proven(Hello("a"), &wrong, challenge);
  out = s.OnHello(2, wrong_token, "x", now, challenge);
  ASSERT_EQ(Count(out, kReject), 1);
  EXPECT_NE(out[0].msg.reject().message().find("token"), std::string::npos);
  v1::Hello r0 = h;
  r0.set_requested_node_rank(0);
  EXPECT_EQ(Count(s.OnHello(3, r0, "x", now, challenge), kReject), 0);
  out = s.OnHello(4, r0, "y", now, challenge);
  ASSERT_EQ(Count(out, kReject), 1);
  EXPECT_NE(out[0].msg.reject().message().find("duplicate --node-rank 0"), std::string::npos);
  v1::Hello r9 = h;
  r9.set_requested_node_rank(9);
  EXPECT_EQ(Count(s.OnHello(5, r9, "z", now, challenge), kReject), 1);
}

// The job token's handshake (join_auth.h) through the state machine: a node
// that proves the token is welcomed by a server that proves it back, and its
// Assignment's spec (with the -x values) is sealed for it alone; a proof
// replayed on another stream, a missing proof and a token-less server are
// all refused.
TEST_F(RendezvousStateTest, TokenHandshakeProvesBothWaysAndSealsTheSpec) {
  auto c = Config(2, 2);
  c.token = "job-token-1";
  c.token_authority = MakeTokenAuthority(c.token, c.run_id);
  (*c.spec.mutable_env())["SECRET_VALUE"] = "api-key-42";
  RendezvousState s(c);
  const std::string ch1 = NewNonce(), ch2 = NewNonce(), ch3 = NewNonce();
  AgentHandshake a1("job-token-1"), a2("job-token-1");
  const v1::Hello h1 = Proven(Hello("a"), &a1, ch1);
  EXPECT_TRUE(h1.SerializeAsString().find("job-token-1") == std::string::npos);
  Outbox out = s.OnHello(1, h1, "10.0.0.1", now, ch1);
  ASSERT_EQ(out.size(), 1u);
  v1::ServerMessage welcome = out[0].msg;
  ASSERT_TRUE(welcome.has_welcome());
  EXPECT_TRUE(absl::IsAlreadyExists(a1.Check(&welcome)));  // the server proved the token

  // The same Hello, replayed on another stream (its own fresh challenge): refused.
  out = s.OnHello(2, h1, "10.0.0.9", now, ch2);
  ASSERT_EQ(Count(out, kReject), 1);
  EXPECT_NE(out[0].msg.reject().message().find("wrong job token"), std::string::npos);
  // No proof at all (an agent without the token): refused the same way.
  out = s.OnHello(3, Hello("c"), "10.0.0.3", now, ch3);
  ASSERT_EQ(Count(out, kReject), 1);
  EXPECT_NE(out[0].msg.reject().message().find("wrong job token"), std::string::npos);

  const v1::Hello h2 = Proven(Hello("b"), &a2, ch2);
  out = s.OnHello(4, h2, "10.0.0.4", now, ch2);
  ASSERT_EQ(out.size(), 1u);
  v1::ServerMessage welcome2 = out[0].msg;
  // Node 1's Welcome does not prove anything on node 4's stream.
  AgentHandshake probe = a2;
  v1::ServerMessage crossed = welcome;
  EXPECT_EQ(probe.Check(&crossed).code(), absl::StatusCode::kPermissionDenied);
  AgentHandshake a2b("job-token-1");
  Proven(Hello("b"), &a2b, ch2);  // another agent nonce: welcome2 is not for it either
  v1::ServerMessage welcome2_copy = welcome2;
  EXPECT_EQ(a2b.Check(&welcome2_copy).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::IsAlreadyExists(a2.Check(&welcome2)));

  s.OnJoin(1, 1001, now);
  out = s.OnJoin(4, 1004, now);
  ASSERT_EQ(Count(out, kAssign), 2);
  v1::ServerMessage for1 = *For(out, 1, kAssign)[0];
  v1::ServerMessage for4 = *For(out, 4, kAssign)[0];
  for (const v1::ServerMessage* m : {&for1, &for4}) {
    EXPECT_FALSE(m->assignment().has_spec());
    EXPECT_EQ(m->SerializeAsString().find("api-key-42"), std::string::npos);
  }
  ASSERT_TRUE(a1.Check(&for1).ok());
  EXPECT_EQ(for1.assignment().spec().env().at("SECRET_VALUE"), "api-key-42");
  // Node 4's sealed spec does not open with node 1's key; altered, not with its own.
  v1::ServerMessage swapped = *For(out, 4, kAssign)[0];
  EXPECT_EQ(a1.Check(&swapped).code(), absl::StatusCode::kDataLoss);
  v1::ServerMessage altered = for4;
  std::string sealed = altered.assignment().sealed_spec();
  sealed[sealed.size() / 2] ^= 1;
  altered.mutable_assignment()->set_sealed_spec(sealed);
  EXPECT_EQ(a2.Check(&altered).code(), absl::StatusCode::kDataLoss);
  v1::ServerMessage other_round = for4;  // bound to its round: not movable to another
  other_round.mutable_assignment()->set_round(7);
  EXPECT_EQ(a2.Check(&other_round).code(), absl::StatusCode::kDataLoss);
  ASSERT_TRUE(a2.Check(&for4).ok());
  EXPECT_EQ(for4.assignment().spec().env().at("SECRET_VALUE"), "api-key-42");
}

// A token with nothing to check it with fails closed: every Hello is refused.
TEST_F(RendezvousStateTest, ATokenWithoutAnAuthorityAdmitsNobody) {
  auto c = Config(1, 1);
  c.token = "job-token-1";
  RendezvousState s(c);
  const std::string challenge = NewNonce();
  AgentHandshake agent("job-token-1");
  Outbox out = s.OnHello(1, Proven(Hello("a"), &agent, challenge), "10.0.0.1", now, challenge);
  ASSERT_EQ(Count(out, kReject), 1);
  EXPECT_NE(out[0].msg.reject().message().find("wrong job token"), std::string::npos);
}

// An agent with a token trusts nothing from a server that has not proven it:
// a server without the token (or a fake one) sends Waiting or an Assignment
// with no Welcome first, and is refused.
TEST_F(RendezvousStateTest, AgentRefusesAServerWithoutTheToken) {
  RendezvousState s(Config(1, 1));  // no token
  AgentHandshake agent("job-token-1");
  const std::string challenge = NewNonce();
  v1::Hello h = Proven(Hello("a"), &agent, challenge);
  Outbox out = s.OnHello(1, h, "10.0.0.1", now, challenge);
  EXPECT_TRUE(out.empty());  // no token: no Welcome
  out = s.OnJoin(1, 1001, now);
  ASSERT_EQ(Count(out, kAssign), 1);
  v1::ServerMessage m = out[0].msg;
  const absl::Status st = agent.Check(&m);
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("did not prove that it knows this job's token"), std::string::npos);
  // A refusal passes without proof; a token-less agent needs none.
  v1::ServerMessage reject;
  reject.mutable_reject()->set_message("no");
  EXPECT_TRUE(agent.Check(&reject).ok());
  AgentHandshake tokenless("");
  EXPECT_TRUE(tokenless.Check(&m).ok());
}

TEST_F(RendezvousStateTest, StaticRanksFollowRequestedOrder) {
  RendezvousState s(Config(2, 2));
  s.OnHello(1, Hello("a", 2, 1), "10.0.0.1", now);
  s.OnHello(2, Hello("b", 2, 0), "10.0.0.2", now);
  s.OnJoin(1, 1, now);
  Outbox out = s.OnJoin(2, 2, now);
  ASSERT_EQ(Count(out, kAssign), 2);
  EXPECT_EQ(For(out, 2, kAssign)[0]->assignment().group_rank(), 0);
  EXPECT_EQ(For(out, 1, kAssign)[0]->assignment().group_rank(), 1);
  EXPECT_EQ(For(out, 1, kAssign)[0]->assignment().master_addr(), "10.0.0.2");
}

TEST_F(RendezvousStateTest, FixedMasterAddressWins) {
  auto c = Config(1, 1);
  c.fixed_master_addr = "store-host";
  c.fixed_master_port = 29500;
  c.use_agent_store = true;
  RendezvousState s(c);
  Outbox out = Arrive(s, 1, "a");
  EXPECT_EQ(out[0].msg.assignment().master_addr(), "store-host");
  EXPECT_EQ(out[0].msg.assignment().master_port(), 29500);
  EXPECT_TRUE(out[0].msg.assignment().use_agent_store());
}

TEST_F(RendezvousStateTest, HelloAfterFinishIsRejected) {
  RendezvousState s(Config(1, 1));
  Arrive(s, 1, "a");
  s.OnSucceeded(1, 0, now);
  EXPECT_EQ(Count(s.OnHello(2, Hello("b"), "x", now), kReject), 1);
}

TEST_F(RendezvousStateTest, LostDuringStopOpensNextRound) {
  RendezvousState s(Config(2, 3, 1));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  Arrive(s, 3, "c");
  s.OnFailed(1, 0, Fail(0, 1), now);
  s.OnJoin(1, 1, now);
  s.OnJoin(2, 2, now);
  Outbox out = s.OnLost(3, now);
  ASSERT_EQ(Count(out, kAssign), 2);
}

// --hang-timeout on many nodes: the verdict is the whole round's, once.
TEST_F(RendezvousStateTest, HangVerdictNeedsEveryNodeOfTheRoundQuietOnce) {
  RendezvousState s(Config(2, 2));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  s.OnQuiet(1, 0, true);
  EXPECT_FALSE(s.TakeHangVerdict());  // b still makes progress
  s.OnQuiet(2, 0, true);
  s.OnQuiet(1, 0, false);  // a printed again
  EXPECT_FALSE(s.TakeHangVerdict());
  s.OnQuiet(1, 7, true);  // another round's word changes nothing
  EXPECT_FALSE(s.TakeHangVerdict());
  s.OnQuiet(1, 0, true);
  std::optional<std::vector<RendezvousState::Member>> round = s.TakeHangVerdict();
  ASSERT_TRUE(round);
  ASSERT_EQ(round->size(), 2u);
  EXPECT_EQ((*round)[0].host, "a");
  EXPECT_EQ((*round)[0].node_rank, 0);
  EXPECT_EQ((*round)[1].host, "b");
  EXPECT_EQ((*round)[1].node_rank, 1);
  EXPECT_FALSE(s.TakeHangVerdict());  // once per round
}

TEST_F(RendezvousStateTest, HangVerdictCountsANodeWhoseWorkersSucceededAsQuiet) {
  RendezvousState s(Config(2, 2));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  s.OnSucceeded(1, 0, now);
  EXPECT_FALSE(s.TakeHangVerdict());  // nobody is quiet yet
  s.OnQuiet(2, 0, true);
  EXPECT_TRUE(s.TakeHangVerdict());
}

TEST_F(RendezvousStateTest, HangVerdictStartsOverWithTheNextRound) {
  RendezvousState s(Config(2, 2, /*restarts=*/1));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  s.OnQuiet(1, 0, true);
  s.OnQuiet(2, 0, true);
  ASSERT_TRUE(s.TakeHangVerdict());
  s.OnFailed(1, 0, Fail(1, 124), now);  // the hung rank's node reports; the round stops
  s.OnJoin(1, 1001, now);
  Outbox out = s.OnJoin(2, 1002, now);
  ASSERT_EQ(Count(out, kAssign), 2);
  EXPECT_EQ(s.round(), 1);
  s.OnQuiet(1, 1, true);  // round 0's quiet nodes do not count in round 1
  EXPECT_FALSE(s.TakeHangVerdict());
  s.OnQuiet(2, 1, true);
  EXPECT_TRUE(s.TakeHangVerdict());
}

// An srun step's tasks are fixed: a node lost for good ends the job at once.
TEST_F(RendezvousStateTest, ClosedMembershipEndsAtOnceWhenALossLeavesTooFew) {
  RendezvousState::Config c = Config(3, 3, /*restarts=*/3);
  c.closed_membership = true;
  RendezvousState s(c);
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  Arrive(s, 3, "c");
  Outbox out = s.OnLost(2, now);
  ASSERT_EQ(Count(out, kFinish), 2);  // to a and c, not a Stop and a wait for join_timeout
  const v1::Finish& f = For(out, 1, kFinish)[0]->finish();
  EXPECT_EQ(f.exit_code(), 1);
  EXPECT_NE(f.message().find("host b was lost (node rank 1, 10.0.0.2); 2 of at least 3 are left and "
                             "no other can join"),
            std::string::npos)
      << f.message();
  EXPECT_TRUE(s.finished());
}

TEST_F(RendezvousStateTest, ClosedMembershipGoesOnWhileEnoughMembersRemainPossible) {
  RendezvousState::Config c = Config(2, 3);
  c.closed_membership = true;
  RendezvousState s(c);
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  // An elastic 2..3 step: one loss still leaves two possible members.
  Outbox out = s.OnLost(1, now);
  EXPECT_EQ(Count(out, kFinish), 0);
  out = s.OnLost(2, now);
  EXPECT_EQ(Count(out, kFinish), 0);  // nobody is left to tell
  EXPECT_TRUE(s.finished());
}

TEST_F(RendezvousStateTest, ClosedMembershipNodeStoppingOnASignalIsNotALoss) {
  RendezvousState::Config c = Config(2, 2);
  c.closed_membership = true;
  RendezvousState s(c);
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  s.OnLeaving(2, SIGTERM, now);
  Outbox out = s.OnLost(2, now);
  EXPECT_EQ(Count(out, kFinish), 0);  // scancel stops every node; no job-wide verdict
  EXPECT_FALSE(s.finished());
}

// A node whose workers all succeeded has finished: losing it afterwards (killed,
// frozen past its keepalive) restarts no one.
TEST_F(RendezvousStateTest, LosingANodeWhoseWorkersSucceededRestartsNoOne) {
  RendezvousState s(Config(2, 2, 3));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  EXPECT_EQ(Count(s.OnSucceeded(1, 0, now), kWaiting), 1);
  Outbox out = s.OnLost(1, now);
  EXPECT_EQ(Count(out, kStop), 0);
  out = s.OnSucceeded(2, 0, now);
  ASSERT_EQ(Count(out, kFinish), 1);
  EXPECT_EQ(For(out, 2, kFinish)[0]->finish().exit_code(), 0);
  EXPECT_EQ(s.round(), 0);
}

TEST_F(RendezvousStateTest, ANewcomerAfterAFinishedNodeLeftWaitsAsSpare) {
  RendezvousState s(Config(2, 2, 3));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  s.OnSucceeded(1, 0, now);
  s.OnLost(1, now);
  Outbox out = Arrive(s, 3, "c");
  EXPECT_EQ(Count(out, kStop), 0);
  ASSERT_EQ(For(out, 3, kWaiting).size(), 1u);
  EXPECT_EQ(For(out, 3, kWaiting)[0]->waiting().kind(), v1::Waiting::SPARE);
  // The running node keeps its group rank for the rest of the round.
  for (const auto& m : s.Members()) {
    if (m.node == 2) {
      EXPECT_EQ(m.node_rank, 1);
    }
  }
}

TEST_F(RendezvousStateTest, ClosedMembershipLosingAFinishedTaskDoesNotFail) {
  RendezvousState::Config c = Config(2, 2);
  c.closed_membership = true;
  RendezvousState s(c);
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  s.OnSucceeded(1, 0, now);
  EXPECT_EQ(Count(s.OnLost(1, now), kFinish), 0);
  Outbox out = s.OnSucceeded(2, 0, now);
  ASSERT_EQ(Count(out, kFinish), 1);
  EXPECT_EQ(out[0].msg.finish().exit_code(), 0);
}

TEST_F(RendezvousStateTest, LosingARunningNodeStillRestarts) {
  RendezvousState s(Config(2, 2, 3));
  Arrive(s, 1, "a");
  Arrive(s, 2, "b");
  s.OnSucceeded(1, 0, now);
  Outbox out = s.OnLost(2, now);
  EXPECT_EQ(Count(out, kStop), 1);
}

// The restart policy: a failure that repeats exactly stops after 2 rounds.
class RestartPolicyTest : public RendezvousStateTest {
 protected:
  v1::Failure Traceback(int rank, int code, const std::string& last) {
    v1::Failure f = Fail(rank, code);
    f.add_stderr_tail("Traceback (most recent call last):");
    f.add_stderr_tail("  File \"/tmp/train.py\", line 12, in <module>");
    f.add_stderr_tail(last);
    return f;
  }
  // Round `round` of a one-node job fails with f; returns what was sent.
  Outbox FailRound(RendezvousState& s, int64_t round, const v1::Failure& f) {
    Outbox out = s.OnFailed(1, round, f, now);
    Outbox j = s.OnJoin(1, 1, now);  // the node stopped and re-joins
    out.insert(out.end(), j.begin(), j.end());
    return out;
  }
};

TEST_F(RestartPolicyTest, IdenticalFailureTwiceInARowEndsTheJob) {
  RendezvousState s(Config(1, 1, 6));
  Arrive(s, 1, "a");
  const v1::Failure f = Traceback(1, 1, "ValueError: bad config");
  Outbox out = FailRound(s, 0, f);
  EXPECT_EQ(Count(out, kAssign), 1);
  out = FailRound(s, 1, f);
  ASSERT_EQ(Count(out, kFinish), 1);
  const v1::Finish& fin = For(out, 1, kFinish)[0]->finish();
  EXPECT_EQ(fin.exit_code(), 1);
  EXPECT_NE(fin.message().find("rank 1 on host h failed the same way in 2 rounds in a row "
                               "(exit code 1, ValueError: bad config)"),
            std::string::npos)
      << fin.message();
  EXPECT_NE(fin.message().find("--restart-policy always"), std::string::npos);
  EXPECT_EQ(s.restarts_used(), 1);
}

TEST_F(RestartPolicyTest, DifferentFailuresKeepRestartingUpToTheBudget) {
  RendezvousState s(Config(1, 1, 3));
  Arrive(s, 1, "a");
  for (int r = 0; r < 3; ++r) {
    Outbox out = FailRound(s, r, Traceback(1, 1, "RuntimeError: step " + std::to_string(r)));
    EXPECT_EQ(Count(out, kAssign), 1) << r;
  }
  Outbox out = FailRound(s, 3, Traceback(1, 1, "RuntimeError: step 3"));
  ASSERT_EQ(Count(out, kFinish), 1);
  EXPECT_NE(For(out, 1, kFinish)[0]->finish().message().find("restart budget is spent"),
            std::string::npos);
}

TEST_F(RestartPolicyTest, SameCodeFromAnotherRankRestarts) {
  RendezvousState s(Config(1, 1, 3));
  Arrive(s, 1, "a");
  FailRound(s, 0, Traceback(0, 1, "ValueError: x"));
  Outbox out = FailRound(s, 1, Traceback(1, 1, "ValueError: x"));
  EXPECT_EQ(Count(out, kAssign), 1);
}

TEST_F(RestartPolicyTest, SignalsAndHangsKeepRestarting) {
  RendezvousState s(Config(1, 1, 4));
  Arrive(s, 1, "a");
  EXPECT_EQ(Count(FailRound(s, 0, Fail(1, 137, SIGKILL)), kAssign), 1);
  EXPECT_EQ(Count(FailRound(s, 1, Fail(1, 137, SIGKILL)), kAssign), 1);
  v1::Failure hung = Fail(1, 124);
  hung.set_hung(true);
  EXPECT_EQ(Count(FailRound(s, 2, hung), kAssign), 1);
  EXPECT_EQ(Count(FailRound(s, 3, hung), kAssign), 1);
  EXPECT_EQ(s.restarts_used(), 4);
}

TEST_F(RestartPolicyTest, SameExitCodeWithoutOutputRepeats) {
  RendezvousState s(Config(1, 1, 5));
  Arrive(s, 1, "a");
  FailRound(s, 0, Fail(0, 3));
  Outbox out = FailRound(s, 1, Fail(0, 3));
  ASSERT_EQ(Count(out, kFinish), 1);
  EXPECT_EQ(For(out, 1, kFinish)[0]->finish().exit_code(), 3);
}

TEST_F(RestartPolicyTest, ALostNodeBetweenBreaksTheStreak) {
  RendezvousState s(Config(1, 2, 5));
  Arrive(s, 1, "a");
  s.OnTick(now + seconds(30));  // round 0 with node 1 alone
  const v1::Failure f = Traceback(1, 1, "ValueError: bad");
  FailRound(s, 0, f);            // round 1
  Arrive(s, 2, "b");             // a newcomer stops round 1 for free
  s.OnJoin(1, 1, now);           // round 2 with both
  Outbox out = s.OnFailed(1, 2, f, now);
  EXPECT_EQ(Count(out, kFinish), 0);
  EXPECT_EQ(Count(out, kStop), 2);
}

TEST_F(RestartPolicyTest, AlwaysRestartsIdenticalFailures) {
  RendezvousState::Config c = Config(1, 1, 3);
  c.restart_identical_failures = true;
  RendezvousState s(c);
  Arrive(s, 1, "a");
  const v1::Failure f = Traceback(1, 1, "ValueError: bad");
  for (int r = 0; r < 3; ++r) EXPECT_EQ(Count(FailRound(s, r, f), kAssign), 1) << r;
  EXPECT_EQ(s.restarts_used(), 3);
}

TEST(FailureRepeatTest, FingerprintIgnoresHostAndTime) {
  v1::Failure a, b;
  a.set_rank(2);
  a.set_exit_code(1);
  a.add_stderr_tail("KeyError: 'x'");
  b = a;
  a.set_host("n1");
  b.set_host("n2");
  a.set_time_unix_s(1);
  b.set_time_unix_s(99);
  FailureRepeat r;
  EXPECT_FALSE(r.OnRoundFailed(a));
  EXPECT_TRUE(r.OnRoundFailed(b));
  r.OnRoundInterrupted();
  EXPECT_FALSE(r.OnRoundFailed(a));
  b.set_error_message("another error file");
  EXPECT_FALSE(r.OnRoundFailed(b));
}

}  // namespace
}  // namespace drun
