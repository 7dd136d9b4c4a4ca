// The lifeline's signal notices (agent/agent_launch.h): what a launcher writes
// after the launch message is what the agent decodes, however the bytes are
// split, and a real --rsh child's standard input carries them in order.
#include <signal.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace drun
