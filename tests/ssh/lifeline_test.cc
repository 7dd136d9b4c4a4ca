// The lifeline's signal notices (agent/agent_launch.h): what a launcher writes
// after the launch message is what the agent decodes, however the bytes are
// split, and a real --rsh child's standard input carries them in order; what
// other threads ask of a remote process (RemoteRequests) wakes its loop.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "agent/agent_launch.h"
#include "launcher/ssh/ssh_rsh.h"

namespace drun {
namespace {

std::vector<int> Decode(const std::string& bytes, size_t chunk) {
  LifelineDecoder d;
  std::vector<int> out;
  for (size_t i = 0; i < bytes.size(); i += chunk) {
    d.Feed(bytes.data() + i, std::min(chunk, bytes.size() - i), &out);
  }
  return out;
}

TEST(LifelineTest, NoticesDecodeWhateverTheSplit) {
  const std::string bytes = EncodeLifelineSignal(SIGTERM) + EncodeLifelineSignal(SIGINT) +
                            EncodeLifelineSignal(SIGUSR1);
  for (size_t chunk : {1u, 2u, 3u, 64u}) {
    EXPECT_EQ(Decode(bytes, chunk), (std::vector<int>{SIGTERM, SIGINT, SIGUSR1})) << chunk;
  }
}

TEST(LifelineTest, OtherBytesAreSkipped) {
  // A newer launcher's notice of another kind, then a signal: only the signal counts.
  const std::string bytes = std::string("x\x01") + EncodeLifelineSignal(SIGHUP);
  EXPECT_EQ(Decode(bytes, 1), (std::vector<int>{SIGHUP}));
  EXPECT_EQ(Decode(std::string("S\0", 2), 1), (std::vector<int>{}));  // no signal 0
}

LifelineNotices DecodeAll(const std::string& bytes, size_t chunk) {
  LifelineDecoder d;
  LifelineNotices out;
  for (size_t i = 0; i < bytes.size(); i += chunk) {
    d.Feed(bytes.data() + i, std::min(chunk, bytes.size() - i), &out);
  }
  return out;
}

TEST(LifelineTest, InputNoticesDecodeWhateverTheSplit) {
  // Data holding every tag byte, one notice longer than a notice's limit,
  // signals in between, the echo mark and the end.
  std::string big(70000, 'S');
  for (size_t i = 0; i < big.size(); i += 7) big[i] = "DENS\0\xff"[i % 6];
  const std::string bytes = EncodeLifelineInput("p x\n") + EncodeLifelineEcho() +
                            EncodeLifelineSignal(SIGUSR1) + EncodeLifelineInput(big) +
                            EncodeLifelineInput("") + EncodeLifelineInputEnd();
  for (size_t chunk : {1u, 2u, 3u, 5u, 4096u, 1u << 20}) {
    LifelineNotices n = DecodeAll(bytes, chunk);
    EXPECT_EQ(n.input, "p x\n" + big) << chunk;
    EXPECT_EQ(n.signals, (std::vector<int>{SIGUSR1})) << chunk;
    EXPECT_TRUE(n.echoed) << chunk;
    EXPECT_TRUE(n.input_end) << chunk;
  }
  // Only the signals, for a caller that wants those.
  EXPECT_EQ(Decode(bytes, 3), (std::vector<int>{SIGUSR1}));
}

TEST(LifelineTest, UnknownTagsAroundInputAreSkipped) {
  const std::string bytes = "x\x01" + EncodeLifelineInput("ab") + "?" + EncodeLifelineSignal(SIGHUP);
  LifelineNotices n = DecodeAll(bytes, 1);
  EXPECT_EQ(n.input, "ab");
  EXPECT_EQ(n.signals, (std::vector<int>{SIGHUP}));
  EXPECT_FALSE(n.input_end);
}

TEST(LifelineTest, RshChildReceivesInputNotices) {
  auto p = StartRshProcess({"/bin/cat"}, "launch");
  ASSERT_TRUE(p.ok()) << p.status();
  (*p)->Send(EncodeLifelineInput("hello\n"));
  (*p)->Signal(SIGINT);
  (*p)->Send(EncodeLifelineInputEnd());
  (*p)->Stop();
  std::string out;
  auto outcome = (*p)->Run([&](int stream, const char* d, size_t n) {
    if (stream == 1) out.append(d, n);
  });
  EXPECT_EQ(outcome.exit_status, 0);
  ASSERT_EQ(out.substr(0, 6), "launch");
  LifelineNotices n = DecodeAll(out.substr(6), 64);
  EXPECT_EQ(n.input, "hello\n");
  EXPECT_EQ(n.signals, (std::vector<int>{SIGINT}));
  EXPECT_TRUE(n.input_end);
}

TEST(LifelineTest, StdinRelayEndsAtOnceOnDevNullAndWhenDisabled) {
  StdinRelay off(false);
  EXPECT_TRUE(off.ended());
  EXPECT_EQ(off.fd(), -1);
  EXPECT_EQ(off.ForNewAgent(), EncodeLifelineInputEnd());
  // The relay reads fd 0: point it at /dev/null for this test.
  const int saved = dup(0);
  const int null_fd = open("/dev/null", O_RDONLY);
  ASSERT_GE(null_fd, 0);
  dup2(null_fd, 0);
  close(null_fd);
  StdinRelay relay(true);
  EXPECT_EQ(relay.fd(), 0);
  EXPECT_EQ(relay.ForNewAgent(), "");
  EXPECT_EQ(relay.Read(), EncodeLifelineInputEnd());
  EXPECT_TRUE(relay.ended());
  EXPECT_EQ(relay.Read(), "");
  dup2(saved, 0);
  close(saved);
}

TEST(LifelineTest, StdinRelayPassesPipeBytes) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const int saved = dup(0);
  dup2(fds[0], 0);
  close(fds[0]);
  ASSERT_EQ(write(fds[1], "typed\n", 6), 6);
  StdinRelay relay(true);
  EXPECT_EQ(relay.Read(), EncodeLifelineInput("typed\n"));  // a pipe echoes nothing
  close(fds[1]);
  EXPECT_EQ(relay.Read(), EncodeLifelineInputEnd());
  dup2(saved, 0);
  close(saved);
}

TEST(LifelineTest, RshChildReceivesTheNoticesThenEof) {
  // cat echoes its standard input and ends at its EOF: what the agent would read.
  auto p = StartRshProcess({"/bin/cat"}, "launch");
  ASSERT_TRUE(p.ok()) << p.status();
  (*p)->Signal(SIGTERM);
  (*p)->Signal(SIGTERM);
  (*p)->Stop();
  std::string out;
  auto outcome = (*p)->Run([&](int stream, const char* d, size_t n) {
    if (stream == 1) out.append(d, n);
  });
  EXPECT_EQ(outcome.exit_status, 0);
  ASSERT_EQ(out.substr(0, 6), "launch");
  std::vector<int> got;
  LifelineDecoder d;
  d.Feed(out.data() + 6, out.size() - 6, &got);
  EXPECT_EQ(got, (std::vector<int>{SIGTERM, SIGTERM}));
}

TEST(LifelineTest, AnAbortEndsARunningRshChild) {
  // cat would wait for its standard input forever: the Abort asked once its
  // first bytes came (from Run's own thread, as a callback may) kills it.
  auto p = StartRshProcess({"/bin/cat"}, "launch");
  ASSERT_TRUE(p.ok()) << p.status();
  auto outcome = (*p)->Run([&](int stream, const char* d, size_t n) { (*p)->Abort(); });
  EXPECT_EQ(outcome.error, "aborted");
  EXPECT_EQ(outcome.exit_signal, "KILL");
}

TEST(RemoteRequestsTest, WakesOnNoticesAndEndingsThatNeverLower) {
  RemoteRequests r;
  ASSERT_TRUE(r.valid());
  auto readable = [&] {
    pollfd p{r.fd(), POLLIN, 0};
    return poll(&p, 1, 0) == 1;
  };
  EXPECT_FALSE(readable());
  r.Send("a");
  r.Send("b");
  EXPECT_TRUE(readable());
  r.Woken();
  EXPECT_FALSE(readable());
  EXPECT_EQ(r.TakeNotices(), "ab");
  EXPECT_EQ(r.TakeNotices(), "");
  EXPECT_EQ(r.ending(), Ending::kNone);
  r.Request(Ending::kAbort);
  EXPECT_TRUE(readable());
  r.Woken();
  r.Request(Ending::kStop);  // lower: ignored, and no wake-up
  EXPECT_FALSE(readable());
  EXPECT_EQ(r.ending(), Ending::kAbort);
}

// The agent's own pre-flight (CheckLaunchHere): the launcher's version, the
// working directory and the script, each refused in one line.
class CheckLaunchHereTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/drun-launch-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    FILE* f = fopen((dir_ + "/train.py").c_str(), "w");
    ASSERT_NE(f, nullptr);
    fclose(f);
    launch_.set_launcher_version("drun 0.1.0");
    launch_.mutable_spec()->set_kind(v1::JobSpec::PYTHON_SCRIPT);
    launch_.mutable_spec()->set_entrypoint("train.py");
    launch_.mutable_spec()->set_working_dir(dir_);
  }
  void TearDown() override {
    unlink((dir_ + "/train.py").c_str());
    rmdir(dir_.c_str());
  }
  std::string dir_;
  v1::AgentLaunch launch_;
};

TEST_F(CheckLaunchHereTest, AcceptsTheSameVersionAndAScriptThatIsThere) {
  EXPECT_TRUE(CheckLaunchHere(launch_, "drun 0.1.0").ok());
  launch_.clear_launcher_version();  // a launch that names no version is not checked for one
  EXPECT_TRUE(CheckLaunchHere(launch_, "drun 9.9.9").ok());
}

TEST_F(CheckLaunchHereTest, RefusesAnotherVersion) {
  auto st = CheckLaunchHere(launch_, "drun 0.2.0");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "this host runs drun 0.2.0 and the launcher drun 0.1.0; install the "
                          "same version here, or pass --remote-drun PATH");
}

TEST_F(CheckLaunchHereTest, RefusesAMissingScriptOrDirectory) {
  launch_.mutable_spec()->set_entrypoint("nope.py");
  auto st = CheckLaunchHere(launch_, "drun 0.1.0");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(absl::StartsWith(st.message(), "the script " + dir_ + "/nope.py is not there"))
      << st.message();
  launch_.mutable_spec()->set_working_dir(dir_ + "/gone");
  st = CheckLaunchHere(launch_, "drun 0.1.0");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(absl::StartsWith(st.message(), "the working directory " + dir_ + "/gone does not "
                                             "exist there"))
      << st.message();
}

TEST_F(CheckLaunchHereTest, AProgramOnPathIsNotAFile) {
  launch_.mutable_spec()->set_kind(v1::JobSpec::PROGRAM);
  launch_.mutable_spec()->set_entrypoint("true");  // found on PATH later, by the agent
  EXPECT_TRUE(CheckLaunchHere(launch_, "drun 0.1.0").ok());
}

}  // namespace
}  // namespace drun
