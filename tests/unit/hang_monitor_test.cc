// HangMonitor with time as input: what counts as progress, and when a job hangs.
#include "agent/hang_monitor.h"

#include <gtest/gtest.h>

namespace drun {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Sample = HangMonitor::Sample;

TEST(HangMonitorTest, IntervalIsAFifthOfTheTimeoutWithinBounds) {
  EXPECT_EQ(HangMonitor(seconds(5)).interval(), seconds(1));
  EXPECT_EQ(HangMonitor(seconds(60)).interval(), seconds(1));
  EXPECT_EQ(HangMonitor(seconds(1)).interval(), milliseconds(200));
  EXPECT_EQ(HangMonitor(milliseconds(100)).interval(), milliseconds(100));
}

// Four ranks blocked (no output, no CPU): hung exactly at the timeout, not before.
TEST(HangMonitorTest, SilentRanksHangAtTheTimeout) {
  HangMonitor m(seconds(5));
  const TimePoint t0{};
  m.Start({{0, 10, 1.0}, {1, 10, 1.0}, {2, 10, 1.0}, {3, 10, 1.0}}, t0);
  for (int s = 1; s <= 5; ++s) {
    EXPECT_FALSE(m.Hung(t0 + seconds(s) - milliseconds(1)));
    m.Observe({{0, 10, 1.0}, {1, 10, 1.0}, {2, 10, 1.0}, {3, 10, 1.0}}, t0 + seconds(s));
  }
  EXPECT_TRUE(m.Hung(t0 + seconds(5)));
}

// One rank printing every 2 s keeps the job alive with a 5 s timeout.
TEST(HangMonitorTest, ARankThatPrintsKeepsTheJobAlive) {
  HangMonitor m(seconds(5));
  const TimePoint t0{};
  m.Start({{0, 0, 0}, {1, 0, 0}}, t0);
  std::uint64_t bytes = 0;
  for (int s = 1; s <= 60; ++s) {
    if (s % 2 == 0) bytes += 20;
    m.Observe({{0, 0, 0}, {1, bytes, 0}}, t0 + seconds(s));
    ASSERT_FALSE(m.Hung(t0 + seconds(s))) << s;
  }
  EXPECT_EQ(m.QuietestRank(), 0);
}

// CPU use counts from 10 % of the interval; less is a polling wait.
TEST(HangMonitorTest, CpuAboveTenPercentIsProgress) {
  HangMonitor m(seconds(2));
  const TimePoint t0{};
  m.Start({{0, 0, 0}}, t0);
  double cpu = 0;
  for (int s = 1; s <= 10; ++s) {
    cpu += 0.2;  // 20 % of a 1 s interval
    m.Observe({{0, 0, cpu}}, t0 + seconds(s));
    ASSERT_FALSE(m.Hung(t0 + seconds(s)));
  }
  for (int s = 11; s <= 13; ++s) {
    cpu += 0.05;  // 5 %
    m.Observe({{0, 0, cpu}}, t0 + seconds(s));
  }
  EXPECT_FALSE(m.Hung(t0 + seconds(11)));
  EXPECT_TRUE(m.Hung(t0 + seconds(12)));
  EXPECT_NEAR(m.ranks().at(0).cpu_last_interval, 0.05, 1e-9);
}

// A rank starved of CPU (8 % of a core while it waits for one most of the
// interval: an oversubscribed machine) wants to run: progress. A blocked rank
// waits for no CPU, and a polling one for little: neither is progress.
TEST(HangMonitorTest, WaitingForACpuIsProgressBlockingIsNot) {
  HangMonitor m(seconds(2));
  const TimePoint t0{};
  m.Start({{0, 0, 0, 0}, {1, 0, 0, 0}}, t0);
  double cpu = 0, wait = 0, poll_cpu = 0, poll_wait = 0;
  for (int s = 1; s <= 10; ++s) {
    cpu += 0.08;
    wait += 0.8;
    poll_cpu += 0.03;
    poll_wait += 0.001;
    m.Observe({{0, 0, cpu, wait}, {1, 0, poll_cpu, poll_wait}}, t0 + seconds(s));
    ASSERT_FALSE(m.Hung(t0 + seconds(s))) << s;
  }
  EXPECT_EQ(m.ranks().at(0).last_progress, t0 + seconds(10));
  EXPECT_EQ(m.ranks().at(1).last_progress, t0);
  for (int s = 11; s <= 12; ++s) {
    poll_cpu += 0.03;
    m.Observe({{0, 0, cpu, wait}, {1, 0, poll_cpu, poll_wait}}, t0 + seconds(s));
  }
  EXPECT_TRUE(m.Hung(t0 + seconds(12)));
}

// A restart begins a new round: the clock of every rank starts again.
TEST(HangMonitorTest, StartResetsEveryRank) {
  HangMonitor m(seconds(1));
  const TimePoint t0{};
  m.Start({{0, 0, 0}}, t0);
  m.Observe({{0, 0, 0}}, t0 + seconds(2));
  ASSERT_TRUE(m.Hung(t0 + seconds(2)));
  m.Start({{0, 0, 0}, {1, 0, 0}}, t0 + seconds(2));
  EXPECT_FALSE(m.Hung(t0 + seconds(2)));
  EXPECT_EQ(m.ranks().size(), 2u);
  EXPECT_EQ(*m.NextSample(), t0 + seconds(2) + m.interval());
}

TEST(HangMonitorTest, NothingWatchedNeverHangs) {
  HangMonitor m(seconds(1));
  EXPECT_FALSE(m.NextSample().has_value());
  EXPECT_FALSE(m.Hung(TimePoint{} + seconds(100)));
  EXPECT_EQ(m.QuietestRank(), -1);
}

// The rank that stopped printing first is named, whatever its number.
TEST(HangMonitorTest, QuietestRankIsTheOneThatStoppedPrintingFirst) {
  HangMonitor m(seconds(10));
  const TimePoint t0{};
  m.Start({{0, 0, 0}, {1, 0, 0}, {2, 0, 0}}, t0);
  m.Observe({{0, 5, 0}, {1, 5, 0}, {2, 5, 0}}, t0 + seconds(1));
  m.Observe({{0, 9, 0}, {1, 5, 0}, {2, 9, 0}}, t0 + seconds(2));
  m.Observe({{0, 9, 0}, {1, 5, 0}, {2, 12, 0}}, t0 + seconds(3));
  EXPECT_EQ(m.QuietestRank(), 1);
}

// Ranks that went quiet in the same interval: none of them was first.
TEST(HangMonitorTest, NoQuietestRankOnATie) {
  HangMonitor m(seconds(10));
  const TimePoint t0{};
  m.Start({{0, 0, 0}, {1, 0, 0}}, t0);
  m.Observe({{0, 5, 0}, {1, 5, 0}}, t0 + seconds(1));
  m.Observe({{0, 5, 0}, {1, 5, 0}}, t0 + seconds(2));
  EXPECT_EQ(m.QuietestRank(), -1);
}

}  // namespace
}  // namespace drun
