#include "launcher/hosts/hostlist.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace drun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Hosts = std::vector<std::string>;

Hosts Expand(std::string_view list) {
  absl::StatusOr<Hosts> hosts = ExpandHostlist(list);
  EXPECT_TRUE(hosts.ok()) << list << ": " << hosts.status();
  return hosts.ok() ? *hosts : Hosts{};
}

std::string ExpandError(std::string_view list) {
  absl::StatusOr<Hosts> hosts = ExpandHostlist(list);
  EXPECT_FALSE(hosts.ok()) << list << " expanded to " << hosts->size() << " hosts";
  if (hosts.ok()) return "";
  EXPECT_EQ(hosts.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(hosts.status().message());
}

// --- Slurm's behaviour (src/common/hostlist.c) ---

TEST(ExpandHostlist, SingleHost) { EXPECT_THAT(Expand("login1"), ElementsAre("login1")); }

TEST(ExpandHostlist, RangeThenPlainHost) {
  EXPECT_THAT(Expand("node[1-3],login1"), ElementsAre("node1", "node2", "node3", "login1"));
}

TEST(ExpandHostlist, CommasInsideBracketsDoNotSplit) {
  EXPECT_THAT(Expand("a[1-2],b[3-4]"), ElementsAre("a1", "a2", "b3", "b4"));
  EXPECT_THAT(Expand("n[1-3,7]"), ElementsAre("n1", "n2", "n3", "n7"));
  EXPECT_THAT(Expand("n[1,3,5-6],m"), ElementsAre("n1", "n3", "n5", "n6", "m"));
}

TEST(ExpandHostlist, ZeroPaddingFromLowBound) {
  EXPECT_THAT(Expand("n[001-003]"), ElementsAre("n001", "n002", "n003"));
  EXPECT_THAT(Expand("n[01-04]"), ElementsAre("n01", "n02", "n03", "n04"));
  EXPECT_THAT(Expand("n[08-10]"), ElementsAre("n08", "n09", "n10"));
  // Slurm takes the width from the low bound only.
  EXPECT_THAT(Expand("n[001-3]"), ElementsAre("n001", "n002", "n003"));
  EXPECT_THAT(Expand("n[1-010]"),
              ElementsAre("n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"));
  // Each range of a group keeps its own width.
  EXPECT_THAT(Expand("n[01-02,7,010]"), ElementsAre("n01", "n02", "n7", "n010"));
}

TEST(ExpandHostlist, UnpaddedRangeCrossesDigitCount) {
  EXPECT_THAT(Expand("x[9-11]"), ElementsAre("x9", "x10", "x11"));
  EXPECT_THAT(Expand("n[1-10]"),
              ElementsAre("n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"));
}

TEST(ExpandHostlist, CrossProductLeftGroupOuter) {
  EXPECT_THAT(Expand("a[1-2]b[3-4]"), ElementsAre("a1b3", "a1b4", "a2b3", "a2b4"));
  EXPECT_THAT(Expand("r[1-2]n[1-2]"), ElementsAre("r1n1", "r1n2", "r2n1", "r2n2"));
  EXPECT_THAT(Expand("r[1-2]n[1,3]x[5-6]"), ElementsAre("r1n1x5", "r1n1x6", "r1n3x5", "r1n3x6",
                                                        "r2n1x5", "r2n1x6", "r2n3x5", "r2n3x6"));
  EXPECT_THAT(Expand("[1-2][1-2]"), ElementsAre("11", "12", "21", "22"));
}

TEST(ExpandHostlist, PrefixWithDigits) {
  EXPECT_THAT(Expand("nid0000[2-4]"), ElementsAre("nid00002", "nid00003", "nid00004"));
  EXPECT_THAT(Expand("gpu2-node[1-2]"), ElementsAre("gpu2-node1", "gpu2-node2"));
  EXPECT_THAT(Expand("node1,node01"), ElementsAre("node1", "node01"));
}

TEST(ExpandHostlist, OrderAndDuplicatesKept) {
  EXPECT_THAT(Expand("b,a,b"), ElementsAre("b", "a", "b"));
  EXPECT_THAT(Expand("n[3-4],n[1-4]"), ElementsAre("n3", "n4", "n1", "n2", "n3", "n4"));
  EXPECT_THAT(Expand("n[2,1,2]"), ElementsAre("n2", "n1", "n2"));
}

TEST(ExpandHostlist, EmptyListAndEmptyEntries) {
  EXPECT_THAT(Expand(""), IsEmpty());
  EXPECT_THAT(Expand(",, ,"), IsEmpty());
  EXPECT_THAT(Expand(",a,,b,"), ElementsAre("a", "b"));
}

TEST(ExpandHostlist, WhitespaceSeparatesLikeComma) {
  // Slurm's tokenizer splits on "\t, "; drun adds the other ASCII white space.
  EXPECT_THAT(Expand("a b\tc\nd"), ElementsAre("a", "b", "c", "d"));
  EXPECT_THAT(Expand(" n[1-2] , m "), ElementsAre("n1", "n2", "m"));
}

TEST(ExpandHostlist, SingleNumberAndSingletonRange) {
  EXPECT_THAT(Expand("n[5]"), ElementsAre("n5"));
  EXPECT_THAT(Expand("n[5-5]"), ElementsAre("n5"));
  EXPECT_THAT(Expand("n[0]"), ElementsAre("n0"));
  EXPECT_THAT(Expand("[7]"), ElementsAre("7"));
}

TEST(ExpandHostlist, HostNamesWithDotsDashesUnderscores) {
  EXPECT_THAT(Expand("a-b_c.d.example.org,10.0.0.[1-2]"),
              ElementsAre("a-b_c.d.example.org", "10.0.0.1", "10.0.0.2"));
}

// --- drun's additions ---

TEST(ExpandHostlist, SuffixAfterBrackets) {
  EXPECT_THAT(Expand("prefix[1-3,7]suffix"),
              ElementsAre("prefix1suffix", "prefix2suffix", "prefix3suffix", "prefix7suffix"));
  EXPECT_THAT(Expand("node[1-2]-ib,login"), ElementsAre("node1-ib", "node2-ib", "login"));
}

TEST(ExpandHostlist, LargeNumbers) {
  EXPECT_THAT(Expand("n[18446744073709551614-18446744073709551615]"),
              ElementsAre("n18446744073709551614", "n18446744073709551615"));
}

// --- errors ---

TEST(ExpandHostlistError, MissingCloseBracket) {
  EXPECT_EQ(ExpandError("node[1-3"), "hostlist entry 'node[1-3': missing ']'");
  // Brackets keep commas together, so the rest of the list is part of the bad entry.
  EXPECT_EQ(ExpandError("a,node[1,2"), "hostlist entry 'node[1,2': missing ']'");
}

TEST(ExpandHostlistError, StrayCloseBracket) {
  EXPECT_EQ(ExpandError("node]1"), "hostlist entry 'node]1': ']' without a matching '['");
  EXPECT_EQ(ExpandError("n[1]]"), "hostlist entry 'n[1]]': ']' without a matching '['");
}

TEST(ExpandHostlistError, NestedBrackets) {
  EXPECT_EQ(ExpandError("a[1[2]]"),
            "hostlist entry 'a[1[2]]': '[' inside '[...]' (brackets do not nest)");
}

TEST(ExpandHostlistError, ReversedRange) {
  EXPECT_EQ(ExpandError("node[5-3]"),
            "hostlist entry 'node[5-3]': reversed range '5-3' (the low bound is above the "
            "high bound)");
}

TEST(ExpandHostlistError, EmptyRange) {
  for (const char* list : {"n[]", "n[1,,2]", "n[1,]", "n[,1]"}) {
    EXPECT_EQ(ExpandError(list),
              std::string("hostlist entry '") + list + "': empty range inside '[...]'");
  }
}

TEST(ExpandHostlistError, GarbageInsideBrackets) {
  EXPECT_EQ(ExpandError("node[a-b]"),
            "hostlist entry 'node[a-b]': invalid range 'a-b' (expected N or N-M, decimal "
            "digits only)");
  // Slurm's strtoul() would accept these; drun does not.
  for (const char* range : {"1-", "-3", "+1", " 2", "1-2-3", "0x10", "1--2", "1x2"}) {
    const std::string list = std::string("n[") + range + "]";
    EXPECT_THAT(ExpandError(list), HasSubstr(std::string("invalid range '") + range + "'")) << list;
  }
  EXPECT_THAT(ExpandError("n[1, 2]"), HasSubstr("invalid range ' 2'"));
}

TEST(ExpandHostlistError, NumberTooLarge) {
  EXPECT_EQ(ExpandError("n[18446744073709551616]"),
            "hostlist entry 'n[18446744073709551616]': number too large in range "
            "'18446744073709551616'");
}

TEST(ExpandHostlistError, ControlAndNonAsciiBytes) {
  EXPECT_EQ(ExpandError(std::string("a\x01"
                                    "z",
                                    3)),
            "hostlist entry 'a\\x01z': invalid character '\\x01' (host names are printable "
            "ASCII)");
  EXPECT_THAT(ExpandError("n\xc3\xa9"), HasSubstr("invalid character '\\xc3'"));
  EXPECT_THAT(ExpandError(std::string("a\0b", 3)), HasSubstr("invalid character '\\x00'"));
}

TEST(ExpandHostlistError, TooManyHosts) {
  EXPECT_EQ(ExpandError("a[0-999999999]"),
            "hostlist expands to more than 1000000 hosts (at entry 'a[0-999999999]')");
  EXPECT_EQ(ExpandError("a[0-18446744073709551615]"),
            "hostlist expands to more than 1000000 hosts (at entry "
            "'a[0-18446744073709551615]')");
  // A cross product is counted before anything is built.
  EXPECT_THAT(ExpandError("a[1-1000]b[1-1000]c[1-1000]"), HasSubstr("more than 1000000 hosts"));
  // The total over entries counts too.
  EXPECT_THAT(ExpandError("a[1-600000],b[1-600000]"),
              HasSubstr("more than 1000000 hosts (at entry 'b[1-600000]')"));
  // Exactly at the cap is fine.
  absl::StatusOr<std::size_t> n = CountHostlist("a[1-1000]b[1-1000]");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1000000u);
}

TEST(ExpandHostlistError, CustomCap) {
  EXPECT_TRUE(ExpandHostlist("n[1-3]", 3).ok());
  absl::StatusOr<Hosts> hosts = ExpandHostlist("n[1-4]", 3);
  ASSERT_FALSE(hosts.ok());
  EXPECT_EQ(hosts.status().message(), "hostlist expands to more than 3 hosts (at entry 'n[1-4]')");
}

TEST(ExpandHostlistError, HostNameTooLong) {
  EXPECT_TRUE(ExpandHostlist(std::string(255, 'a')).ok());
  EXPECT_THAT(ExpandError(std::string(256, 'a')),
              HasSubstr("expands to host names longer than 255 characters"));
  // The width of a range counts, and so does the widest number it reaches.
  EXPECT_THAT(ExpandError(std::string(250, 'a') + "[000001-2]"),
              HasSubstr("longer than 255 characters"));
  EXPECT_TRUE(ExpandHostlist(std::string(250, 'a') + "[1-10000]").ok());
  EXPECT_THAT(ExpandError(std::string(251, 'a') + "[1-10000]"),
              HasSubstr("longer than 255 characters"));
}

TEST(ExpandHostlistError, LongEntryIsTruncatedInMessage) {
  const std::string list = std::string(300, 'x') + "[";
  const std::string message = ExpandError(list);
  EXPECT_EQ(message, "hostlist entry '" + std::string(80, 'x') + "...': missing ']'");
}

TEST(ExpandHostlistError, EscapedEntryIsTruncatedAfterEscaping) {
  std::string escaped;
  for (int i = 0; i < 20; ++i) escaped += "\\x01";
  EXPECT_EQ(ExpandError(std::string(100, '\x01')),
            "hostlist entry '" + escaped +
                "...': invalid character '\\x01' (host names are printable ASCII)");
}

TEST(ExpandHostlistError, FirstBadEntryIsReported) {
  EXPECT_EQ(ExpandError("ok[1-2],bad[2-1],worse["),
            "hostlist entry 'bad[2-1]': reversed range '2-1' (the low bound is above the "
            "high bound)");
}

// --- FirstHost / CountHostlist ---

TEST(FirstHost, FirstOfExpansion) {
  EXPECT_EQ(*FirstHost("gpu[07-12],login1"), "gpu07");
  EXPECT_EQ(*FirstHost(",, login1,n[1-2]"), "login1");
  EXPECT_EQ(*FirstHost("r[2-3]n[5,1]-ib"), "r2n5-ib");
  EXPECT_EQ(*FirstHost("n[3,1-2]"), "n3");
}

TEST(FirstHost, ErrorsMatchExpand) {
  absl::StatusOr<std::string> empty = FirstHost("");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.status().message(), "hostlist is empty");
  // A bad later entry fails FirstHost too: the whole list is validated.
  absl::StatusOr<std::string> bad = FirstHost("n1,n[2-1]");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("reversed range"));
  // And so does the cap, without expanding anything.
  EXPECT_FALSE(FirstHost("n1,n[0-99999999999]").ok());
}

TEST(CountHostlist, CountsWithoutExpanding) {
  EXPECT_EQ(*CountHostlist(""), 0u);
  EXPECT_EQ(*CountHostlist("n[1-3],m,r[1-2]x[1-3]"), 10u);
  EXPECT_FALSE(CountHostlist("n[").ok());
}

// --- ExpandTasksPerNode ---

std::vector<int> Tasks(std::string_view spec) {
  absl::StatusOr<std::vector<int>> v = ExpandTasksPerNode(spec);
  EXPECT_TRUE(v.ok()) << spec << ": " << v.status();
  return v.ok() ? *v : std::vector<int>{};
}

std::string TasksError(std::string_view spec) {
  absl::StatusOr<std::vector<int>> v = ExpandTasksPerNode(spec);
  EXPECT_FALSE(v.ok()) << spec;
  if (v.ok()) return "";
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(v.status().message());
}

TEST(ExpandTasksPerNode, SlurmForms) {
  EXPECT_THAT(Tasks("2(x3),1"), ElementsAre(2, 2, 2, 1));
  EXPECT_THAT(Tasks("4"), ElementsAre(4));
  EXPECT_THAT(Tasks("1,2,3"), ElementsAre(1, 2, 3));
  EXPECT_THAT(Tasks("8(x2)"), ElementsAre(8, 8));
  EXPECT_THAT(Tasks("1(x1),3(x2),2"), ElementsAre(1, 3, 3, 2));
  EXPECT_THAT(Tasks("0,2"), ElementsAre(0, 2));
  EXPECT_THAT(Tasks(""), IsEmpty());
}

TEST(ExpandTasksPerNode, Errors) {
  EXPECT_EQ(TasksError("2(x3),,1"),
            "tasks-per-node list '2(x3),,1': item '': empty (expected N or N(xR))");
  EXPECT_EQ(TasksError("2,"), "tasks-per-node list '2,': item '': empty (expected N or N(xR))");
  EXPECT_EQ(TasksError("a"), "tasks-per-node list 'a': item 'a': expected N or N(xR)");
  EXPECT_EQ(TasksError("2(3)"), "tasks-per-node list '2(3)': item '2(3)': expected N or N(xR)");
  EXPECT_EQ(TasksError("2(x)"), "tasks-per-node list '2(x)': item '2(x)': expected N or N(xR)");
  EXPECT_EQ(TasksError("2(x3"), "tasks-per-node list '2(x3': item '2(x3': expected N or N(xR)");
  EXPECT_EQ(TasksError("(x3)"), "tasks-per-node list '(x3)': item '(x3)': expected N or N(xR)");
  EXPECT_EQ(TasksError("-1"), "tasks-per-node list '-1': item '-1': expected N or N(xR)");
  EXPECT_EQ(TasksError(" 2"), "tasks-per-node list ' 2': item ' 2': expected N or N(xR)");
  EXPECT_EQ(TasksError("2(x0)"),
            "tasks-per-node list '2(x0)': item '2(x0)': repeat count must be at least 1");
  EXPECT_EQ(TasksError("2000000"),
            "tasks-per-node list '2000000': item '2000000': count above 1000000");
  EXPECT_EQ(TasksError("1(x99999999999999999999)"),
            "tasks-per-node list '1(x99999999999999999999)': item "
            "'1(x99999999999999999999)': repeat count too large");
  EXPECT_EQ(TasksError("1(x1000001)"),
            "tasks-per-node list '1(x1000001)': expands to more than 1000000 nodes");
  EXPECT_EQ(TasksError("1(x600000),1(x600000)"),
            "tasks-per-node list '1(x600000),1(x600000)': expands to more than 1000000 nodes");
}

TEST(ExpandTasksPerNode, CustomCap) {
  EXPECT_TRUE(ExpandTasksPerNode("1(x3)", 3).ok());
  EXPECT_FALSE(ExpandTasksPerNode("1(x3),1", 3).ok());
}

}  // namespace
}  // namespace drun
