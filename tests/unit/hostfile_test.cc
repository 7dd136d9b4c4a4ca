#include "launcher/hosts/hostfile.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace drun {

// Lets gtest print entries in failure messages.
void PrintTo(const HostEntry& e, std::ostream* os) {
  *os << "{user='" << e.user << "' host='" << e.host << "' slots=" << e.slots
      << " max_slots=" << e.max_slots << " line=" << e.line << "}";
}

namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

auto Entry(const std::string& user, const std::string& host, int slots, int max_slots, int line) {
  return AllOf(Field("user", &HostEntry::user, user), Field("host", &HostEntry::host, host),
               Field("slots", &HostEntry::slots, slots),
               Field("max_slots", &HostEntry::max_slots, max_slots),
               Field("line", &HostEntry::line, line));
}

std::vector<HostEntry> Parse(std::string_view text) {
  absl::StatusOr<std::vector<HostEntry>> v = ParseHostfile(text, "hosts");
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : std::vector<HostEntry>{};
}

std::string ParseError(std::string_view text) {
  absl::StatusOr<std::vector<HostEntry>> v = ParseHostfile(text, "hosts");
  EXPECT_FALSE(v.ok()) << text;
  if (v.ok()) return "";
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(v.status().message());
}

std::vector<HostEntry> Arg(std::string_view arg) {
  absl::StatusOr<std::vector<HostEntry>> v = ParseHostArg(arg);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : std::vector<HostEntry>{};
}

std::string ArgError(std::string_view arg) {
  absl::StatusOr<std::vector<HostEntry>> v = ParseHostArg(arg);
  EXPECT_FALSE(v.ok()) << arg;
  if (v.ok()) return "";
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(v.status().message());
}

// --- host files: accepted syntax ---

TEST(ParseHostfile, PlainHosts) {
  EXPECT_THAT(Parse("node01\nnode02\n"),
              ElementsAre(Entry("", "node01", 0, 0, 1), Entry("", "node02", 0, 0, 2)));
}

TEST(ParseHostfile, NoTrailingNewline) {
  EXPECT_THAT(Parse("node01 slots=2"), ElementsAre(Entry("", "node01", 2, 0, 1)));
}

TEST(ParseHostfile, SlotsAndMaxSlots) {
  EXPECT_THAT(Parse("a slots=4\nb max_slots=8\nc slots=2 max_slots=6\nd max_slots=3 slots=3\n"),
              ElementsAre(Entry("", "a", 4, 0, 1), Entry("", "b", 0, 8, 2), Entry("", "c", 2, 6, 3),
                          Entry("", "d", 3, 3, 4)));
}

TEST(ParseHostfile, SpacesAroundEquals) {
  EXPECT_THAT(Parse("red01 max_slots = 2\nred02 slots =3\nred03 slots= 4\n"),
              ElementsAre(Entry("", "red01", 0, 2, 1), Entry("", "red02", 3, 0, 2),
                          Entry("", "red03", 4, 0, 3)));
}

TEST(ParseHostfile, CommentsBlankLinesTabsCrlf) {
  const char* text =
      "# cluster A\n"
      "\n"
      "   \n"
      "node01 slots=2   # two GPUs\n"
      "\tnode02\tslots=4\t\n"
      "node03#no space before the comment\n"
      "   # indented comment\n"
      "node04 slots=1\r\n"
      "\r\n";
  EXPECT_THAT(Parse(text), ElementsAre(Entry("", "node01", 2, 0, 4), Entry("", "node02", 4, 0, 5),
                                       Entry("", "node03", 0, 0, 6), Entry("", "node04", 1, 0, 8)));
}

TEST(ParseHostfile, UserAtHost) {
  EXPECT_THAT(
      Parse("alice@node01 slots=2\nbob.smith@node02\n"),
      ElementsAre(Entry("alice", "node01", 2, 0, 1), Entry("bob.smith", "node02", 0, 0, 2)));
}

TEST(ParseHostfile, DeepSpeedStyle) {
  EXPECT_THAT(Parse("worker-1 slots=4\nworker-2 slots=4\n"),
              ElementsAre(Entry("", "worker-1", 4, 0, 1), Entry("", "worker-2", 4, 0, 2)));
}

TEST(ParseHostfile, OpenMpiSynonyms) {
  EXPECT_THAT(Parse("a count=2\nb cpu=3\nc max-slots=4\nd slots_max=5\ne slots-max=6\n"
                    "f max_count=7\ng cpu-max=8\n"),
              ElementsAre(Entry("", "a", 2, 0, 1), Entry("", "b", 3, 0, 2), Entry("", "c", 0, 4, 3),
                          Entry("", "d", 0, 5, 4), Entry("", "e", 0, 6, 5), Entry("", "f", 0, 7, 6),
                          Entry("", "g", 0, 8, 7)));
}

TEST(ParseHostfile, AddressesAndFqdns) {
  EXPECT_THAT(Parse("10.0.0.1 slots=2\nfe80::1 slots=1\nnode1.cluster.example.org\n"
                    "root@2001:db8::7\n"),
              ElementsAre(Entry("", "10.0.0.1", 2, 0, 1), Entry("", "fe80::1", 1, 0, 2),
                          Entry("", "node1.cluster.example.org", 0, 0, 3),
                          Entry("root", "2001:db8::7", 0, 0, 4)));
}

TEST(ParseHostfile, EmptyAndCommentOnly) {
  EXPECT_THAT(Parse(""), IsEmpty());
  EXPECT_THAT(Parse("# nothing here\n\n  \n"), IsEmpty());
}

// --- host files: repeated hosts ---

TEST(ParseHostfile, RepeatedLinesAddSlotsInFirstAppearanceOrder) {
  EXPECT_THAT(Parse("a slots=2\nb slots=1\na slots=3\n"),
              ElementsAre(Entry("", "a", 5, 0, 1), Entry("", "b", 1, 0, 2)));
}

TEST(ParseHostfile, RepeatedBareLinesCountOneEach) {
  // mpirun/MPICH machine files: a host listed N times has N slots.
  EXPECT_THAT(Parse("a\nb\na\na\n"), ElementsAre(Entry("", "a", 3, 0, 1), Entry("", "b", 0, 0, 2)));
  EXPECT_THAT(Parse("a slots=4\na\n"), ElementsAre(Entry("", "a", 5, 0, 1)));
  EXPECT_THAT(Parse("a\na slots=4\n"), ElementsAre(Entry("", "a", 5, 0, 1)));
}

TEST(ParseHostfile, RepeatedMaxSlotsSumOnlyWhenAlwaysGiven) {
  EXPECT_THAT(Parse("a slots=1 max_slots=2\na slots=2 max_slots=3\n"),
              ElementsAre(Entry("", "a", 3, 5, 1)));
  EXPECT_THAT(Parse("a max_slots=2\na max_slots=3\n"), ElementsAre(Entry("", "a", 2, 5, 1)));
  // One appearance without a cap leaves the host uncapped.
  EXPECT_THAT(Parse("a slots=2 max_slots=2\na slots=4\n"), ElementsAre(Entry("", "a", 6, 0, 1)));
}

TEST(ParseHostfile, RepeatedHostWithSameUser) {
  EXPECT_THAT(Parse("bob@a slots=1\nbob@a slots=1\n"), ElementsAre(Entry("bob", "a", 2, 0, 1)));
}

// --- host files: errors ---

TEST(ParseHostfileError, UnknownKey) {
  EXPECT_EQ(ParseError("a\nb\nc slotz=2\n"),
            "hosts:3: expected 'slots=N' or 'max_slots=N' after host name, got 'slotz=2'");
  EXPECT_EQ(ParseError("c slots=2 extra\n"),
            "hosts:1: expected 'slots=N' or 'max_slots=N' after host name, got 'extra'");
  EXPECT_EQ(ParseError("c sockets = 2\n"),
            "hosts:1: expected 'slots=N' or 'max_slots=N' after host name, got 'sockets = 2'");
  EXPECT_EQ(ParseError("c =2\n"),
            "hosts:1: expected 'slots=N' or 'max_slots=N' after host name, got '=2'");
  // MPICH's "host:N" is not host-file syntax here; say what to write instead.
  EXPECT_EQ(ParseError("node1:4\n"),
            "hosts:1: invalid host name 'node1:4' (to give slots in a host file write 'node1 "
            "slots=4')");
}

TEST(ParseHostfileError, HintOnlyForAValidName) {
  EXPECT_EQ(ParseError("no\x01pe:4\n"),
            "hosts:1: invalid host name 'no\\x01pe:4' (':' only belongs in an IPv6 address)");
  EXPECT_EQ(ParseError("bob@n1:4\n"),
            "hosts:1: invalid host name 'n1:4' (to give slots in a host file write 'n1 slots=4')");
}

TEST(ParseHostfileError, KeyWithoutEquals) {
  EXPECT_EQ(ParseError("c slots 2\n"), "hosts:1: expected 'slots=N', got 'slots'");
  EXPECT_EQ(ParseError("c max-slots\n"), "hosts:1: expected 'max_slots=N', got 'max-slots'");
}

TEST(ParseHostfileError, BadCount) {
  EXPECT_EQ(ParseError("c slots=\n"),
            "hosts:1: expected a positive integer after 'slots=', got nothing");
  EXPECT_EQ(ParseError("c slots=abc\n"),
            "hosts:1: expected a positive integer after 'slots=', got 'abc'");
  EXPECT_EQ(ParseError("c slots=-1\n"),
            "hosts:1: expected a positive integer after 'slots=', got '-1'");
  EXPECT_EQ(ParseError("c slots=2.5\n"),
            "hosts:1: expected a positive integer after 'slots=', got '2.5'");
  EXPECT_EQ(ParseError("c max_slots=4max\n"),
            "hosts:1: expected a positive integer after 'max_slots=', got '4max'");
  EXPECT_EQ(ParseError("c slots=0\n"),
            "hosts:1: 'slots=0': the count must be at least 1 (leave the host out to give it "
            "no processes)");
  EXPECT_EQ(ParseError("c slots=1000001\n"),
            "hosts:1: 'slots=1000001' is above the limit of 1000000");
  EXPECT_EQ(ParseError("c slots=99999999999999999999999\n"),
            "hosts:1: 'slots=99999999999999999999999' is above the limit of 1000000");
}

TEST(ParseHostfileError, RepeatedKeyOnOneLine) {
  EXPECT_EQ(ParseError("c slots=1 slots=2\n"), "hosts:1: 'slots' is given twice");
  EXPECT_EQ(ParseError("c slots=1 count=2\n"), "hosts:1: 'slots' is given twice");
  EXPECT_EQ(ParseError("c max_slots=1 max-slots=2\n"), "hosts:1: 'max_slots' is given twice");
}

TEST(ParseHostfileError, MaxSlotsBelowSlots) {
  EXPECT_EQ(ParseError("c slots=4 max_slots=2\n"), "hosts:1: max_slots=2 is less than slots=4");
}

TEST(ParseHostfileError, BadHostNames) {
  EXPECT_EQ(ParseError("no$de\n"),
            "hosts:1: invalid host name 'no$de' (expected letters, digits, '-', '.', '_')");
  EXPECT_EQ(ParseError("-oProxyCommand=x\n"),
            "hosts:1: invalid host name '-oProxyCommand=x' (expected letters, digits, '-', '.', "
            "'_')");
  EXPECT_EQ(ParseError("-node\n"),
            "hosts:1: invalid host name '-node' (must not start with '-' or '.')");
  EXPECT_EQ(ParseError(".node\n"),
            "hosts:1: invalid host name '.node' (must not start with '-' or '.')");
  EXPECT_EQ(ParseError("node[1-2]\n"),
            "hosts:1: invalid host name 'node[1-2]' (expected letters, digits, '-', '.', '_')");
  EXPECT_EQ(ParseError("a:b:c\n"),
            "hosts:1: invalid host name 'a:b:c' (':' only belongs in an IPv6 address)");
  EXPECT_EQ(ParseError(std::string(256, 'h') + "\n"),
            "hosts:1: host name '" + std::string(80, 'h') + "...' is longer than 255 characters");
  // inet_pton() would stop at the NUL and accept the address before it.
  EXPECT_EQ(ParseError(std::string("fe80::1\0x", 9)),
            "hosts:1: invalid host name 'fe80::1\\x00x' (':' only belongs in an IPv6 address)");
  EXPECT_EQ(ParseError(std::string("a\x01") + "\n"),
            "hosts:1: invalid host name 'a\\x01' (expected letters, digits, '-', '.', '_')");
}

TEST(ParseHostfileError, BadUserHost) {
  EXPECT_EQ(ParseError("@node\n"), "hosts:1: empty user name before '@'");
  EXPECT_EQ(ParseError("bob@\n"), "hosts:1: missing host name");
  EXPECT_EQ(ParseError("a@b@c\n"),
            "hosts:1: invalid host 'a@b@c' (expected [user@]host with one '@')");
  EXPECT_EQ(ParseError("b!b@node\n"),
            "hosts:1: invalid user name 'b!b' (expected letters, digits, '-', '.', '_')");
  EXPECT_EQ(ParseError("-b@node\n"),
            "hosts:1: invalid user name '-b' (expected letters, digits, '-', '.', '_')");
}

TEST(ParseHostfileError, ConflictingUsers) {
  EXPECT_EQ(ParseError("alice@a\nb\nbob@a\n"),
            "hosts:3: host 'a' is given with user 'bob' here but with user 'alice' on line 1 (a "
            "host has one user name)");
  EXPECT_EQ(ParseError("a\nbob@a\n"),
            "hosts:2: host 'a' is given with user 'bob' here but with no user on line 1 (a host "
            "has one user name)");
}

TEST(ParseHostfileError, TotalSlotsCap) {
  EXPECT_EQ(ParseError("a slots=1000000\na slots=1\n"),
            "hosts:2: host 'a' has more than 1000000 slots in total");
}

TEST(ParseHostfileError, LineNumbersCountBlankAndCommentLines) {
  EXPECT_THAT(ParseError("# c\n\na\n\n  b slots=x # bad\n"), HasSubstr("hosts:5: "));
  EXPECT_THAT(ParseError("a\r\nb slots=x\r\n"), HasSubstr("hosts:2: "));
}

TEST(ParseHostfileError, FilenameIsUsedAsGiven) {
  absl::StatusOr<std::vector<HostEntry>> v = ParseHostfile("x slots=0", "/etc/drun/hosts.txt");
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("/etc/drun/hosts.txt:1: "));
}

// --- ReadHostfile ---

class ReadHostfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hostfile_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string& f : files_) unlink(f.c_str());
    rmdir(dir_.c_str());
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    files_.push_back(path);
    return path;
  }
  std::string dir_;
  std::vector<std::string> files_;
};

TEST_F(ReadHostfileTest, ReadsAndParses) {
  const std::string path = Write("hosts", "a slots=2\n# c\nb\n");
  absl::StatusOr<std::vector<HostEntry>> v = ReadHostfile(path);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_THAT(*v, ElementsAre(Entry("", "a", 2, 0, 1), Entry("", "b", 0, 0, 3)));
}

TEST_F(ReadHostfileTest, ParseErrorsNameThePath) {
  const std::string path = Write("hosts", "a\nb slotz=2\n");
  absl::StatusOr<std::vector<HostEntry>> v = ReadHostfile(path);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(),
            path + ":2: expected 'slots=N' or 'max_slots=N' after host name, got 'slotz=2'");
}

TEST_F(ReadHostfileTest, MissingFile) {
  const std::string path = dir_ + "/nope";
  absl::StatusOr<std::vector<HostEntry>> v = ReadHostfile(path);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(v.status().message(), "cannot open hostfile '" + path + "': No such file or directory");
}

TEST_F(ReadHostfileTest, Directory) {
  absl::StatusOr<std::vector<HostEntry>> v = ReadHostfile(dir_);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(), "cannot read hostfile '" + dir_ + "': Is a directory");
}

TEST_F(ReadHostfileTest, TooLarge) {
  const std::string path = Write("big", std::string(kMaxHostfileBytes + 1, '#'));
  absl::StatusOr<std::vector<HostEntry>> v = ReadHostfile(path);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(), "hostfile '" + path + "' is larger than 16 MiB; is it the right file?");
}

TEST_F(ReadHostfileTest, Unreadable) {
  if (geteuid() == 0) GTEST_SKIP() << "root reads any file";
  const std::string path = Write("secret", "a\n");
  ASSERT_EQ(chmod(path.c_str(), 0), 0);
  absl::StatusOr<std::vector<HostEntry>> v = ReadHostfile(path);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(v.status().message(), HasSubstr(path));
}

// --- -H / --host ---

TEST(ParseHostArg, HostsAndSlots) {
  EXPECT_THAT(Arg("node01:5,node02"),
              ElementsAre(Entry("", "node01", 5, 0, 0), Entry("", "node02", 0, 0, 0)));
  EXPECT_THAT(Arg("localhost"), ElementsAre(Entry("", "localhost", 0, 0, 0)));
}

TEST(ParseHostArg, UserAtHost) {
  EXPECT_THAT(Arg("bob@node01:2,alice@node02"),
              ElementsAre(Entry("bob", "node01", 2, 0, 0), Entry("alice", "node02", 0, 0, 0)));
}

TEST(ParseHostArg, DuplicatesAggregate) {
  // mpirun: "--host node01:2,node02,node01:3" gives node01 five slots.
  EXPECT_THAT(Arg("node01:2,node02,node01:3"),
              ElementsAre(Entry("", "node01", 5, 0, 0), Entry("", "node02", 0, 0, 0)));
  EXPECT_THAT(Arg("a,a,b,a"), ElementsAre(Entry("", "a", 3, 0, 0), Entry("", "b", 0, 0, 0)));
}

TEST(ParseHostArg, EmptyEntriesSkipped) {
  EXPECT_THAT(Arg(""), IsEmpty());
  EXPECT_THAT(Arg(",a,,b,"), ElementsAre(Entry("", "a", 0, 0, 0), Entry("", "b", 0, 0, 0)));
}

TEST(ParseHostArg, Addresses) {
  EXPECT_THAT(Arg("10.0.0.1:2,[fe80::1]:4,[::1],2001:db8::2"),
              ElementsAre(Entry("", "10.0.0.1", 2, 0, 0), Entry("", "fe80::1", 4, 0, 0),
                          Entry("", "::1", 0, 0, 0), Entry("", "2001:db8::2", 0, 0, 0)));
  EXPECT_THAT(Arg("bob@[::1]:3"), ElementsAre(Entry("bob", "::1", 3, 0, 0)));
}

TEST(ParseHostArgError, BadSlots) {
  EXPECT_EQ(ArgError("node01:x"),
            "--host entry 'node01:x': expected a positive integer after 'node01:', got 'x'");
  EXPECT_EQ(ArgError("node01:"),
            "--host entry 'node01:': expected a positive integer after 'node01:', got nothing");
  EXPECT_EQ(ArgError("node01:0"),
            "--host entry 'node01:0': 'node01:0': the count must be at least 1 (leave the host "
            "out to give it no processes)");
  EXPECT_EQ(ArgError("node01:2000000"),
            "--host entry 'node01:2000000': 'node01:2000000' is above the limit of 1000000");
  EXPECT_EQ(ArgError("a:1000000,a:1"),
            "--host entry 'a:1': host 'a' has more than 1000000 slots in total");
}

TEST(ParseHostArgError, BadHosts) {
  EXPECT_EQ(ArgError(":4"), "--host entry ':4': missing host name");
  EXPECT_EQ(
      ArgError("a b"),
      "--host entry 'a b': invalid host name 'a b' (expected letters, digits, '-', '.', '_')");
  EXPECT_EQ(ArgError("a:b:c"),
            "--host entry 'a:b:c': invalid host 'a:b:c' (expected host[:N]; write an IPv6 "
            "address with slots as [addr]:N)");
  EXPECT_EQ(ArgError("[fe80::1"), "--host entry '[fe80::1': missing ']' after IPv6 address");
  EXPECT_EQ(ArgError("[node1]:2"),
            "--host entry '[node1]:2': 'node1' is not an IPv6 address (only those take brackets)");
  EXPECT_EQ(ArgError("[::1]4"), "--host entry '[::1]4': expected ':N' after ']', got '4'");
  EXPECT_EQ(ArgError("@a"), "--host entry '@a': empty user name before '@'");
  EXPECT_EQ(ArgError("x@y@z"),
            "--host entry 'x@y@z': invalid host 'x@y@z' (expected [user@]host with one '@')");
  EXPECT_EQ(ArgError("bob@a,a"),
            "--host entry 'a': host 'a' is given with no user here but with user 'bob' earlier "
            "(a host has one user name)");
}

}  // namespace
}  // namespace drun
