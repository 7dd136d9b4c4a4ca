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

#include "absl/strings/str_cat.h"

namespace drun {
namespace {

// A piece's origin as text: "host" for an agent's own bytes, "src PREFIX|CONT"
// for a worker stream's, nullopt for a line that is no frame.
struct Piece {
  std::optional<std::string> origin;
  std::string bytes;
  bool operator==(const Piece& o) const { return origin == o.origin && bytes == o.bytes; }
};
void PrintTo(const Piece& p, std::ostream* os) { *os << (p.origin ? *p.origin : "(no frame)") << ": " << ::testing::PrintToString(p.bytes); }

std::optional<std::string> OriginText(const RelayOrigin& o) {
  switch (o.kind) {
    case RelayOrigin::Kind::kAgent:
      return std::string(o.host);
    case RelayOrigin::Kind::kSource:
      return absl::StrCat("src ", o.prefix, "|", o.cont_prefix, "|", o.colour_index);
    case RelayOrigin::Kind::kNone:
      break;
  }
  return std::nullopt;
}

// Decodes `stream` fed in pieces of `step` bytes.
std::vector<Piece> Decode(const std::string& stream, size_t step) {
  RelayDecoder d;
  std::vector<Piece> out;
  auto sink = [&](const RelayOrigin& origin, absl::string_view bytes) {
    out.push_back({OriginText(origin), std::string(bytes)});
  };
  for (size_t i = 0; i < stream.size(); i += step) d.Feed(absl::string_view(stream).substr(i, step), sink);
  d.Finish(sink);
  return out;
}

std::string Joined(const std::vector<Piece>& pieces, const std::string& origin) {
  std::string out;
  for (const Piece& p : pieces) {
    if (p.origin == origin) out += p.bytes;
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

TEST(RelayFramesTest, AWorkerStreamsFramesCarryItsPrefixesAndDecodeToItsBytes) {
  const std::string data = "hello\nyour name? " + std::string(3000, 'x') + "\r10%";
  const std::string frames = RelayFrames::EncodeSource("[n1:rank2]: ", "[n1:rank2]+ ", 2, data) +
                             RelayFrames::Encode("n1", "drun: a line of the agent\n");
  for (size_t step : {size_t{1}, size_t{13}, frames.size()}) {
    const std::vector<Piece> pieces = Decode(frames, step);
    EXPECT_EQ(Joined(pieces, "src [n1:rank2]: |[n1:rank2]+ |2"), data) << step;
    EXPECT_EQ(Joined(pieces, "n1"), "drun: a line of the agent\n") << step;
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
  relay.Feed(RelayFrames::EncodeSource("[node1:rank0]: ", "[node1:rank0]+ ", 0, " 10%"));
  RunDeadlines();
  relay.Feed(RelayFrames::EncodeSource("[node2:rank1]: ", "[node2:rank1]+ ", 1, "log\n") +
             RelayFrames::Encode("node2", "drun: stopping on SIGTERM\n"));
  relay.Feed("srun: error: node2: task 1: Killed\n");
  RunDeadlines();
  relay.Feed(RelayFrames::EncodeSource("[node1:rank0]: ", "[node1:rank0]+ ", 0, " 20%\n"));
  relay.Finish();
  hub_->Drain();
  EXPECT_EQ(ReadAll(err_[0]),
            "[node1:rank0]:  10%\n[node2:rank1]: log\ndrun: node2: stopping on SIGTERM\n"
            "srun: error: node2: task 1: Killed\n[node1:rank0]+  20%\n");
}

// Issue 31: two ranks of one host ask input() and one typed line answers
// both. The agent frames each rank's bytes unprefixed, so the one console
// that prefixes and cuts lines is the launcher's: every answer is on a row of
// its own under one prefix, and the typed line's echo ends the open prompt.
TEST_F(SrunRelayTest, TwoRanksOfAHostAnswerATypedLineEachOnARowWithOnePrefix) {
  int agent_out[2];
  ASSERT_EQ(pipe2(agent_out, O_CLOEXEC), 0);
  {
    Console agent(agent_out[1], agent_out[1]);
    agent.RelayFramed("node1");
    const int rank2 = agent.AddSource(1, "[node1:rank2]: ", "[node1:rank2]+ ", 2, false);
    const int rank3 = agent.AddSource(1, "[node1:rank3]: ", "[node1:rank3]+ ", 3, false);
    SrunOutputRelay relay(hub_.get(), 1);
    auto pass = [&] {
      agent.ShowPartials(OutClock::now() + Console::kPartialDelay);
      agent.Flush();
      relay.Feed(ReadAll(agent_out[0]));
      RunDeadlines();
    };
    agent.Write(rank2, "rank 2: your name? ");
    agent.Write(rank3, "rank 3: your name? ");
    pass();
    EXPECT_EQ(ReadAll(out_[0]), "[node1:rank2]: rank 2: your name? \n[node1:rank3]: rank 3: your name? ");
    hub_->InputEchoed();  // "dave" + Enter, echoed by the terminal after rank 3's prompt
    agent.Write(rank2, "rank 2 got 'dave'\n");
    agent.Write(rank3, "rank 3 got 'dave'\n");
    pass();
    hub_->Drain();
    EXPECT_EQ(ReadAll(out_[0]), "[node1:rank2]+ rank 2 got 'dave'\n[node1:rank3]: rank 3 got 'dave'\n");
    // A source that ends with its line open: the launcher's console ends it.
    agent.Write(rank3, "bye");
    pass();
    agent.RemoveSource(rank3);
    pass();
    hub_->Drain();
    EXPECT_EQ(ReadAll(out_[0]), "[node1:rank3]: bye\n");
  }
  for (int fd : agent_out) close(fd);
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
