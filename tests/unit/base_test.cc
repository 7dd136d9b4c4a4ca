// The shared layer (rendezvous/base/): endpoints, quoting, signal names, owned
// descriptors, random tokens, the clock helpers.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rendezvous/base/clock.h"
#include "rendezvous/base/endpoint.h"
#include "rendezvous/base/quote.h"
#include "rendezvous/base/random.h"
#include "rendezvous/base/read_file.h"
#include "rendezvous/base/words.h"
#include "rendezvous/base/signal_name.h"
#include "rendezvous/base/unique_fd.h"

namespace drun {
namespace {

using ::testing::HasSubstr;

// --- endpoints ---

TEST(EndpointTest, ParsesHostAndPort) {
  auto ep = ParseEndpoint("node01:29500", 1);
  ASSERT_TRUE(ep.ok()) << ep.status();
  EXPECT_EQ(ep->host, "node01");
  EXPECT_EQ(ep->port, 29500);
}

TEST(EndpointTest, MissingPortTakesTheDefault) {
  auto ep = ParseEndpoint("10.0.0.1", 29400);
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->host, "10.0.0.1");
  EXPECT_EQ(ep->port, 29400);
}

TEST(EndpointTest, BracketedIpv6WithAndWithoutPort) {
  auto ep = ParseEndpoint("[fe80::1]:80", 1);
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->host, "fe80::1");
  EXPECT_EQ(ep->port, 80);
  auto bare = ParseEndpoint("[::1]", 7);
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->host, "::1");
  EXPECT_EQ(bare->port, 7);
}

TEST(EndpointTest, UnbracketedIpv6IsAHostWithoutPort) {
  auto ep = ParseEndpoint("2001:db8::5", 9);
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->host, "2001:db8::5");
  EXPECT_EQ(ep->port, 9);
}

TEST(EndpointTest, FormatBracketsIpv6AndRoundTrips) {
  for (const char* text : {"a:1", "127.0.0.1:65535", "[::1]:2", "[2001:db8::5]:29400"}) {
    auto ep = ParseEndpoint(text, 0);
    ASSERT_TRUE(ep.ok()) << text;
    EXPECT_EQ(ep->ToString(), text);
  }
  EXPECT_EQ((Endpoint{"::", 0}).ToString(), "[::]:0");
}

TEST(EndpointTest, RefusesBadText) {
  EXPECT_THAT(ParseEndpoint("[::1:80", 1).status().message(), HasSubstr("missing ']'"));
  EXPECT_THAT(ParseEndpoint("[::1]80", 1).status().message(), HasSubstr("is not [ADDR]:PORT"));
  EXPECT_THAT(ParseEndpoint(":80", 1).status().message(), HasSubstr("has no host"));
  EXPECT_THAT(ParseEndpoint("h:", 1).status().message(), HasSubstr("PORT in 1-65535"));
  EXPECT_THAT(ParseEndpoint("h:65536", 1).status().message(), HasSubstr("no valid port"));
  EXPECT_THAT(ParseEndpoint("h:x", 1).status().message(), HasSubstr("no valid port"));
}

TEST(EndpointTest, PortZeroOnlyWhereAllowed) {
  EXPECT_FALSE(ParseEndpoint("0.0.0.0:0", 1).ok());
  auto ep = ParseEndpoint("0.0.0.0:0", 1, PortZero::kAllow);
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->port, 0);
}

TEST(EndpointTest, NumericSockAddrTakesOnlyAddresses) {
  auto v4 = NumericSockAddr({"127.0.0.1", 80});
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->family(), AF_INET);
  auto v6 = NumericSockAddr({"::1", 80});
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->family(), AF_INET6);
  EXPECT_FALSE(NumericSockAddr({"localhost", 80}).ok());
}

TEST(EndpointTest, LoopbackAddressesAreTheLoopbackRanges) {
  for (const char* ip : {"127.0.0.1", "127.0.0.2", "127.255.255.254", "::1"}) {
    EXPECT_TRUE(IsLoopbackAddress(ip)) << ip;
  }
  for (const char* ip : {"10.0.0.1", "128.0.0.1", "::", "::ffff:10.0.0.1", "localhost", ""}) {
    EXPECT_FALSE(IsLoopbackAddress(ip)) << ip;
  }
}

TEST(EndpointTest, LoopbackIsLocalAndRoutesFromItself) {
  EXPECT_TRUE(IsLocalAddress("127.0.0.1"));
  EXPECT_FALSE(IsLocalAddress("not-an-ip"));
  EXPECT_EQ(RouteSourceAddress("127.0.0.1", 9), "127.0.0.1");
  auto r = ResolveSockAddr({"127.0.0.1", 5});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->family(), AF_INET);
}

// --- quoting ---

// What /bin/sh makes of a command line: the real shell, not a model of it.
std::string ThroughShell(const std::string& word) {
  std::string cmd = "printf %s " + ShellQuote(word);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "<popen failed>";
  std::string out;
  char buf[256];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

// Every file a user names on the command line is read by ReadSmallFile: its four answers.
TEST(ReadSmallFileTest, ContentAndEachErrorNamesTheFile) {
  const std::string dir = std::filesystem::temp_directory_path() / "base_test_read_XXXXXX";
  std::string tmpl = dir;
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string path = tmpl + "/f";
  {
    UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(write(fd.get(), "a\nb", 3), 3);
  }
  absl::StatusOr<std::string> text = ReadSmallFile(path, 1 << 20, "hostfile");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "a\nb");

  text = ReadSmallFile(tmpl + "/missing", 1 << 20, "job file");
  EXPECT_EQ(text.status().message(),
            "cannot open job file '" + tmpl + "/missing': No such file or directory");
  text = ReadSmallFile(tmpl, 1 << 20, "--env-file");
  EXPECT_EQ(text.status().message(), "cannot read --env-file '" + tmpl + "': Is a directory");
  ASSERT_EQ(truncate(path.c_str(), (1 << 20) + 1), 0);
  text = ReadSmallFile(path, 1 << 20, "hostfile");
  EXPECT_EQ(text.status().message(),
            "hostfile '" + path + "' is larger than 1 MiB; is it the right file?");
  std::filesystem::remove_all(tmpl);
}

TEST(QuoteTest, ShellQuoteRoundTripsThroughSh) {
  for (const std::string s : {"", "plain", "it's", "a b\tc", "$HOME `id` $(id) \\n", "''",
                              "semi;colon|pipe&amp>redir<", "new\nline", "*?[glob]", "-n"}) {
    EXPECT_EQ(ThroughShell(s), s) << ShellQuote(s);
  }
}

TEST(QuoteTest, ShellQuoteSpelling) {
  EXPECT_EQ(ShellQuote("/opt/drun"), "'/opt/drun'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
}

TEST(QuoteTest, QuoteTextEscapesAndCuts) {
  EXPECT_EQ(QuoteText("a\x01z"), "'a\\x01z'");
  const std::string cut = QuoteText(std::string(200, 'x'));
  EXPECT_EQ(cut, "'" + std::string(80, 'x') + "...'");
  // An escape sequence is never split by the cut.
  const std::string ctrl = QuoteText(std::string(79, 'x') + "\x01");
  EXPECT_EQ(ctrl, "'" + std::string(79, 'x') + "...'");
}

TEST(QuoteTest, QuotePathIsWhole) {
  const std::string path = "/tmp/" + std::string(200, 'p');
  EXPECT_EQ(QuotePath(path), "'" + path + "'");
  EXPECT_EQ(QuotePath("a\nb"), "'a\\nb'");
}

// --- signal names ---

TEST(SignalNameTest, NamesAndNumbers) {
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(SignalName(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(SignalAbbrev(SIGINT), "INT");
  EXPECT_EQ(SignalName(SIGRTMIN + 2), "signal " + std::to_string(SIGRTMIN + 2));
  EXPECT_EQ(SignalAbbrev(SIGRTMIN + 2), std::to_string(SIGRTMIN + 2));
}

// --- owned descriptors ---

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

TEST(UniqueFdTest, ClosesWhenItGoesAway) {
  int raw;
  {
    UniqueFd fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    raw = fd.get();
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFdTest, MoveTransfersOwnership) {
  UniqueFd a(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int raw = a.get();
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(b.get(), raw);
  UniqueFd c;
  c = std::move(b);
  EXPECT_EQ(c.get(), raw);
  EXPECT_TRUE(IsOpen(raw));
  c.reset();
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFdTest, ResetClosesTheOldOneAndReleaseKeepsItOpen) {
  UniqueFd a(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int first = a.get();
  a.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
  EXPECT_FALSE(IsOpen(first));
  const int second = a.release();
  EXPECT_FALSE(a.valid());
  EXPECT_TRUE(IsOpen(second));
  close(second);
}

TEST(UniqueFdTest, MakePipeEndsCloseThemselves) {
  int r, w;
  {
    UniqueFd re, we;
    ASSERT_TRUE(MakePipe(&re, &we));
    r = re.get();
    w = we.get();
    ASSERT_EQ(write(we.get(), "x", 1), 1);
    char c;
    ASSERT_EQ(read(re.get(), &c, 1), 1);
    EXPECT_EQ(c, 'x');
  }
  EXPECT_FALSE(IsOpen(r));
  EXPECT_FALSE(IsOpen(w));
}

// --- random tokens, temporary directories ---

TEST(RandomTest, HexTokensHaveTheirLengthAndDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    std::string t = RandomHex(16);
    EXPECT_EQ(t.size(), 32u);
    EXPECT_EQ(t.find_first_not_of("0123456789abcdef"), std::string::npos);
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(RandomTest, MakeTempDirIsPrivateAndNew) {
  auto a = MakeTempDir("drun_base_test_");
  auto b = MakeTempDir("drun_base_test_");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  struct stat st;
  ASSERT_EQ(stat(a->c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_THAT(std::filesystem::path(*a).filename().string(), ::testing::StartsWith("drun_base_test_"));
  rmdir(a->c_str());
  rmdir(b->c_str());
}

// --- clock ---

TEST(ClockTest, SecondsConversions) {
  EXPECT_EQ(SecondsToDuration(1.5), std::chrono::milliseconds(1500));
  EXPECT_DOUBLE_EQ(DurationToSeconds(std::chrono::milliseconds(250)), 0.25);
}

TEST(ClockTest, PollTimeoutRoundsUpAndClamps) {
  const TimePoint now{};
  EXPECT_EQ(PollTimeoutMs(std::nullopt, now), -1);
  EXPECT_EQ(PollTimeoutMs(now + std::chrono::microseconds(1), now), 1);
  EXPECT_EQ(PollTimeoutMs(now + std::chrono::milliseconds(7), now), 7);
  EXPECT_EQ(PollTimeoutMs(now - std::chrono::seconds(1), now), 0);
  EXPECT_EQ(PollTimeoutMs(now + std::chrono::hours(1), now, 100), 100);
}

// Counts in messages agree with their number; names near a misspelt one are offered.
TEST(WordsTest, CountAndNearestName) {
  EXPECT_EQ(Count(1, "rank"), "1 rank");
  EXPECT_EQ(Count(0, "rank"), "0 ranks");
  EXPECT_EQ(Count(3, "line"), "3 lines");
  EXPECT_EQ(Count(2, "child", "children"), "2 children");
  EXPECT_EQ(Noun(1, "line"), "line");
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  const std::vector<std::string> files = {"ex1_send_recv.py", "ex2_reduce.py", "README.md"};
  EXPECT_EQ(NearestName("ex2_reduse.py", files, 2), "ex2_reduce.py");
  EXPECT_EQ(NearestName("train.py", files, 2), "");
  EXPECT_EQ(NearestName("x", {"y"}, 2), "");  // one letter is no typo of another
}

}  // namespace
}  // namespace drun
