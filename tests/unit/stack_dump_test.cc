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
