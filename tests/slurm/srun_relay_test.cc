// The agents' output under --launcher slurm: an agent's Console writing relay
// frames (agent/output.h RelayFrames, Console::RelayFramed) and the launcher's
// SrunOutputRelay (launcher/slurm/srun_relay.h) reading them back from srun's
// stream into the hosts' console, through pipes. srun itself hands each frame
// on whole (a line under 1024 bytes); the cluster tests (test_salloc.py) run
// the real thing.
#include "launcher/slurm/srun_relay.h"

#include "tests/ssh/console_hub_fixture.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace drun {
namespace {

struct Piece {
  std::optional<std::string> host;
  std::string bytes;
  bool operator==(const Piece& o) const { return host == o.host && bytes == o.bytes; }
};
void PrintTo(const Piece& p, std::ostream* os) { *os << (p.host ? *p.host : "(no frame)") << ": " << ::testing::PrintToString(p.bytes); }

// Decodes `stream` fed in pieces of `step` bytes.
std::vector<Piece> Decode(const std::string& stream, size_t step) {
  RelayDecoder d;
  std::vector<Piece> out;
  auto sink = [&](std::optional<absl::string_view> host, absl::string_view bytes) {
    out.push_back({host ? std::optional<std::string>(std::string(*host)) : std::nullopt, std::string(bytes)});
  };
  for (size_t i = 0; i < stream.size(); i += step) d.Feed(absl::string_view(stream).substr(i, step), sink);
  d.Finish(sink);
  return out;
}

std::string Joined(const std::vector<Piece>& pieces, const std::string& host) {
  std::string out;
  for (const Piece& p : pieces) {
    if (p.host == host) out += p.bytes;
  }
  return out;
}

TEST(RelayFramesTest, EveryFrameIsOneShortLineAndTheyDecodeToTheBytes) {
  const std::string data = "[n1:rank0]: hello\n[n1:rank0]: your name? " + std::string(5000, 'x') + "\n\r" +
                           std::string(3000, 'y');
  const std::string frames = RelayFrames::Encode("n1", data);
  size_t start = 0;
  for (size_t nl; (nl = frames.find('\n', start)) != std::string::npos; start = nl + 1) {
    EXPECT_LE(nl + 1 - start, RelayFrames::kFrameMax);
  }
  EXPECT_EQ(start, frames.size());  // ends with a whole frame, even for a partial line
  for (size_t step : {size_t{1}, size_t{7}, size_t{1000}, frames.size()}) {
    const std::vector<Piece> pieces = Decode(frames, step);
    EXPECT_EQ(Joined(pieces, "n1"), data) << step;
    EXPECT_EQ(pieces.size(), Decode(frames, frames.size()).size());
  }
}

TEST(RelayFramesTest, ConsecutiveEncodingsOfAPartialLineJoin) {
  const std::string frames = RelayFrames::Encode("n1", "[n1:rank0]: 10%") +
                             RelayFrames::Encode("n1", "\r[n1:rank0]: 20%") + RelayFrames::Encode("n1", " done\n");
  EXPECT_EQ(Decode(frames, 3),
            (std::vector<Piece>{{"n1", "[n1:rank0]: 10%"}, {"n1", "\r[n1:rank0]: 20%"}, {"n1", " done\n"}}));
}

TEST(RelayFramesTest, LinesThatAreNoFramesPassWhole) {
  const std::string stream = "srun: error: node2: task 1: Exited with exit code 1\n" +
                             RelayFrames::Encode("node1", "[node1:rank0]: x") + "drun: bad launch\nno newline";
  EXPECT_EQ(Decode(stream, 5), (std::vector<Piece>{{std::nullopt, "srun: error: node2: task 1: Exited with exit code 1\n"},
                                                   {"node1", "[node1:rank0]: x"},
                                                   {std::nullopt, "drun: bad launch\n"},
                                                   {std::nullopt, "no newline"}}));
}

using SrunRelayTest = ConsoleHubFixture;

// An agent's Console on a relay: what it writes is frames from its host, and
// a partial line goes out as one (srun would hold it otherwise).
TEST_F(SrunRelayTest, AnAgentsPromptShowsOnTheLaunchersConsoleBeforeItsNewline) {
  int agent_out[2], agent_err[2];
  ASSERT_EQ(pipe2(agent_out, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(agent_err, O_CLOEXEC), 0);
  {
    Console agent(agent_out[1], agent_err[1]);
    agent.RelayFramed("node3");
    const int rank0 = agent.AddSource(1, "[node3:rank0]: ", "[node3:rank0]+ ", 0, false);
    agent.Write(rank0, "hello\nrank 0: your name? ");
    agent.ShowPartials(OutClock::now() + Console::kPartialDelay);
    agent.Flush();
    const std::string frames = ReadAll(agent_out[0]);
    EXPECT_EQ(frames.back(), '\n');  // srun passes it on at once
    SrunOutputRelay relay(hub_.get(), 1);
    relay.Feed(frames);
    RunDeadlines();
    EXPECT_EQ(ReadAll(out_[0]), "[node3:rank0]: hello\n[node3:rank0]: rank 0: your name? ");
    agent.Write(rank0, "carol\n");
    agent.Flush();
    relay.Feed(ReadAll(agent_out[0]));
    hub_->Drain();
    EXPECT_EQ(ReadAll(out_[0]), "carol\n");
  }
  for (int fd : {agent_out[0], agent_out[1], agent_err[0], agent_err[1]}) close(fd);
}

TEST_F(SrunRelayTest, TwoHostsPartialLinesNeverShareALineAndOwnLinesNameTheHost) {
  SrunOutputRelay relay(hub_.get(), 2);
  relay.Feed(RelayFrames::Encode("node1", "[node1:rank0]:  10%"));
  RunDeadlines();
  relay.Feed(RelayFrames::Encode("node2", "[node2:rank1]: log\ndrun: stopping on SIGTERM\n"));
  relay.Feed("srun: error: node2: task 1: Killed\n");
  RunDeadlines();
  relay.Feed(RelayFrames::Encode("node1", " 20%\n"));
  relay.Finish();
  hub_->Drain();
  EXPECT_EQ(ReadAll(err_[0]),
            "[node1:rank0]:  10%\n[node2:rank1]: log\ndrun: node2: stopping on SIGTERM\n"
            "srun: error: node2: task 1: Killed\n[node1:rank0]+  20%\n");
}

TEST_F(SrunRelayTest, ReadFromTellsMoreFromEmptyFromEnded) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
  SrunOutputRelay relay(hub_.get(), 1);
  EXPECT_EQ(relay.ReadFrom(p[0]), SrunOutputRelay::Read::kEmpty);
  const std::string frames = RelayFrames::Encode("node1", "[node1:rank0]: a\n[node1:rank0]: b");
  ASSERT_EQ(write(p[1], frames.data(), frames.size()), static_cast<ssize_t>(frames.size()));
  EXPECT_EQ(relay.ReadFrom(p[0]), SrunOutputRelay::Read::kEmpty);
  close(p[1]);
  EXPECT_EQ(relay.ReadFrom(p[0]), SrunOutputRelay::Read::kEnded);
  close(p[0]);
  RunDeadlines();
  hub_->Drain();
  EXPECT_EQ(ReadAll(out_[0]), "[node1:rank0]: a\n[node1:rank0]: b");
}

}  // namespace
}  // namespace drun
