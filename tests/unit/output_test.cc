#include "agent/output.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace drun {
namespace {

std::vector<std::string> Split(LineSplitter& s, const std::vector<std::string>& chunks, bool flush) {
  std::vector<std::string> lines;
  auto on = [&](absl::string_view l) { lines.emplace_back(l); };
  for (const auto& c : chunks) s.Feed(c, on);
  if (flush) s.Flush(on);
  return lines;
}

TEST(LineSplitterTest, WholeLinesAcrossChunks) {
  LineSplitter s;
  EXPECT_EQ(Split(s, {"he", "llo\nwor", "ld\n", "\n"}, false),
            (std::vector<std::string>{"hello", "world", ""}));
  EXPECT_FALSE(s.has_pending());
}

TEST(LineSplitterTest, LastLineWithoutNewlineOnFlush) {
  LineSplitter s;
  EXPECT_EQ(Split(s, {"a\nb"}, false), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(s.has_pending());
  std::vector<std::string> rest;
  s.Flush([&](absl::string_view l) { rest.emplace_back(l); });
  EXPECT_EQ(rest, (std::vector<std::string>{"b"}));
}

TEST(LineSplitterTest, OverlongLinesAreCut) {
  LineSplitter s(4);
  EXPECT_EQ(Split(s, {"abcdefghij\n"}, false), (std::vector<std::string>{"abcd", "efgh", "ij"}));
  LineSplitter t(4);
  EXPECT_EQ(Split(t, {"ab", "cdef", "g"}, true), (std::vector<std::string>{"abcd", "efg"}));
}

TEST(TailBufferTest, KeepsLastLines) {
  TailBuffer t(2);
  t.Add("1");
  t.Add("2");
  t.Add("3");
  EXPECT_EQ(t.lines(), (std::vector<std::string>{"2", "3"}));
}

TEST(StdSpecTest, ParsesTorchrunForms) {
  auto all = ParseStdSpec("3");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->ForRank(0), 3);
  EXPECT_EQ(all->ForRank(7), 3);
  auto per = ParseStdSpec("0:1,2:3");
  ASSERT_TRUE(per.ok());
  EXPECT_EQ(per->ForRank(0), 1);
  EXPECT_EQ(per->ForRank(1), 0);
  EXPECT_EQ(per->ForRank(2), 3);
  EXPECT_EQ(ParseStdSpec("")->ForRank(0), 0);
  for (const char* bad : {"4", "x", "0:4", "a:1", "-1"}) EXPECT_FALSE(ParseStdSpec(bad).ok()) << bad;
}

TEST(RankListTest, Parses) {
  EXPECT_EQ(*ParseRankList("0,2"), (std::vector<int>{0, 2}));
  EXPECT_TRUE(ParseRankList("")->empty());
  EXPECT_FALSE(ParseRankList("0,x").ok());
}

TEST(ConsoleTest, PrefixesEveryLineAndKeepsStreamsApart) {
  int out[2], err[2];
  ASSERT_EQ(pipe(out), 0);
  ASSERT_EQ(pipe(err), 0);
  {
    Console c(out[1], err[1]);
    EXPECT_FALSE(c.colour());  // a pipe is not a TTY
    c.Line(1, "[rank0]: ", "hello", 0);
    c.Line(2, "[rank1]: ", "oops", 1);
    c.Line(1, "[rank1]: ", "", 1);
    c.Flush();
  }
  close(out[1]);
  close(err[1]);
  char buf[256];
  ssize_t n = read(out[0], buf, sizeof buf);
  EXPECT_EQ(std::string(buf, n), "[rank0]: hello\n[rank1]: \n");
  n = read(err[0], buf, sizeof buf);
  EXPECT_EQ(std::string(buf, n), "[rank1]: oops\n");
  close(out[0]);
  close(err[0]);
}

}  // namespace
}  // namespace drun
