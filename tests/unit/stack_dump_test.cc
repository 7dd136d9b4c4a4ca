// The pure parts of a stack dump (agent/stack_dump.h): which rank stands out
// and which went quiet first, as --hang-timeout's table marks them.
#include "agent/stack_dump.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace drun {
namespace {

RankStack Rank(int rank, const std::string& where, char state = 'S', double quiet = 5.0,
               double window = 1.0) {
  RankStack r;
  r.target.rank = rank;
  r.target.host = rank < 2 ? "a" : "b";
  r.target.quiet_s = quiet;
  r.target.window_s = window;
  r.state = state;
  r.where = where;
  return r;
}

const char kReduce[] = "distributed_c10d.py:1541 in all_reduce";

TEST(StackDumpTest, TheRankElsewhereThanAClearMajorityIsOdd) {
  StackDump d;
  d.ranks = {Rank(0, kReduce), Rank(1, kReduce), Rank(2, "train.py:13 in stuck"), Rank(3, kReduce)};
  EXPECT_EQ(OddRanks(d), std::vector<int>{2});
}

TEST(StackDumpTest, TwoAgainstTwoSaysNothingButStateDAlwaysStandsOut) {
  StackDump d;
  d.ranks = {Rank(0, kReduce), Rank(1, kReduce), Rank(2, "x.py:1 in f"), Rank(3, "x.py:1 in f")};
  EXPECT_TRUE(OddRanks(d).empty());
  d.ranks[3].state = 'D';
  EXPECT_EQ(OddRanks(d), std::vector<int>{3});
}

// Frames unreadable (no `where`): the kernel's state and wait channel tell
// the rank asleep from the ones waiting in a collective, and nothing known
// accuses no one.
TEST(StackDumpTest, WithoutFramesTheWaitChannelFindsTheRankElsewhere) {
  StackDump d;
  d.ranks = {Rank(0, ""), Rank(1, ""), Rank(2, "")};
  for (RankStack& r : d.ranks) r.wchan = "futex_do_wait";
  d.ranks[1].wchan = "hrtimer_nanosleep";
  EXPECT_EQ(OddRanks(d), std::vector<int>{1});
  EXPECT_EQ(HangVerdict(d, 1), "rank 1 is at an unknown place (state S hrtimer_nanosleep)");
  // One rank's frames known, the others' not: the wait channels still decide.
  d.ranks[0].where = kReduce;
  EXPECT_EQ(OddRanks(d), std::vector<int>{1});
  // Nothing known of one rank: no one is accused.
  d.ranks[2].wchan = "";
  EXPECT_TRUE(OddRanks(d).empty());
  EXPECT_EQ(HangVerdict(d, -1), "drun cannot tell which rank stands out: where some are is not known");
  const std::string table = FormatHangTable(d, -1);
  EXPECT_EQ(table.find("<-"), std::string::npos) << table;
}

TEST(StackDumpTest, VerdictNamesTheCulpritsPlaceOrSaysNoneStandsOut) {
  StackDump d;
  d.ranks = {Rank(0, "nap.py:3 in nap"), Rank(1, "nap.py:3 in nap")};
  EXPECT_TRUE(OddRanks(d).empty());
  EXPECT_EQ(HangVerdict(d, -1), "no rank stands out: every one is at nap.py:3 in nap");
  EXPECT_EQ(HangVerdict(d, 1), "rank 1 is at nap.py:3 in nap");
  d.ranks[1].where = "x.py:1 in f";
  EXPECT_EQ(HangVerdict(d, -1), "no rank stands out: no place holds most of them");
}

// A rank whose frames are missing says why once, in its capture's own text;
// a capture that failed as a whole (no text) says it on a line of its own.
TEST(StackDumpTest, WhyFramesAreMissingIsSaidOncePerRank) {
  StackDump d;
  d.ranks = {Rank(0, ""), Rank(1, "")};
  d.ranks[0].unavailable = "CPython 3.99.0 not readable by drun";
  d.ranks[0].text = "    Process 7 (python3) state S\n      frames unavailable: CPython 3.99.0 not readable by drun\n";
  d.ranks[1].unavailable = "no process 8";
  const std::string dump = FormatDump(d);
  EXPECT_EQ(dump.find("not readable"), dump.rfind("not readable")) << dump;
  EXPECT_NE(dump.find("    frames: no process 8\n"), std::string::npos) << dump;
}

TEST(StackDumpTest, QuietestAcrossNodesNeedsAMarginOfOneSampleInterval) {
  StackDump d;
  // Samples of different nodes are taken at different moments: 0.4 s apart is a tie.
  d.ranks = {Rank(0, kReduce, 'S', 5.0), Rank(1, kReduce, 'S', 5.4), Rank(2, kReduce, 'S', 4.9)};
  EXPECT_EQ(QuietestRank(d), -1);
  d.ranks[1].target.quiet_s = 6.5;
  EXPECT_EQ(QuietestRank(d), 1);
  d.ranks = {Rank(0, kReduce, 'S', -1)};  // nothing known
  EXPECT_EQ(QuietestRank(d), -1);
}

TEST(StackDumpTest, HangTableMarksTheOddRankAndTheQuietestOnTheirRows) {
  StackDump d;
  d.ranks = {Rank(0, kReduce), Rank(1, kReduce), Rank(2, "train.py:13 in stuck", 'S', 9.0), Rank(3, kReduce)};
  const std::string table = FormatHangTable(d, QuietestRank(d));
  EXPECT_NE(table.find("train.py:13 in stuck  <- not where the others are; went quiet first\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("all_reduce  <-"), std::string::npos) << table;
}

}  // namespace
}  // namespace drun
