// The ssh launcher's console (launcher/ssh/ssh_console.h): hosts' streams that
// come prefixed by their agents, through one Console into pipes.
#include "launcher/ssh/ssh_console.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

namespace drun {
namespace {

class ConsoleHubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(pipe2(out_, O_CLOEXEC), 0);
    ASSERT_EQ(pipe2(err_, O_CLOEXEC), 0);
    hub_ = std::make_unique<ConsoleHub>(out_[1], err_[1]);
  }
  void TearDown() override {
    hub_.reset();
    for (int fd : {out_[0], out_[1], err_[0], err_[1]}) close(fd);
  }
  // Calls Tick at each deadline it names until none is left (the launcher's loop).
  void RunDeadlines() {
    while (std::optional<OutClock::time_point> due = hub_->Tick()) {
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(*due - OutClock::now());
      poll(nullptr, 0, std::max<int>(0, static_cast<int>(wait.count()) + 1));
    }
  }
  static std::string ReadAll(int fd) {
    std::string out;
    char buf[4096];
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 0) <= 0) return out;
      const ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0) return out;
      out.append(buf, static_cast<size_t>(n));
    }
  }
  int out_[2], err_[2];
  std::unique_ptr<ConsoleHub> hub_;
};

TEST_F(ConsoleHubTest, APartialLineShowsAndACutLineGoesOnUnderTheRanksContinuation) {
  HostStream a(hub_.get(), 1, "a"), b(hub_.get(), 1, "b");
  a.Feed("[a:rank0]: x");
  RunDeadlines();
  EXPECT_EQ(ReadAll(out_[0]), "[a:rank0]: x");  // shown before its newline
  b.Feed("[b:rank1]: whole\n");
  RunDeadlines();  // b waits for a's line, then cuts it
  a.Feed("yz\n");
  hub_->Drain();
  EXPECT_EQ(ReadAll(out_[0]), "\n[b:rank1]: whole\n[a:rank0]+ yz\n");
}

TEST_F(ConsoleHubTest, ARedrawAfterACutKeepsItsOwnPrefix) {
  HostStream a(hub_.get(), 2, "a"), b(hub_.get(), 2, "b");
  a.Feed("[a:rank0]:  10%");
  RunDeadlines();
  b.Feed("[b:rank1]: log\n");
  RunDeadlines();
  a.Feed("\r[a:rank0]:  50%");
  RunDeadlines();
  a.Feed("\r[a:rank0]: 100%\n");
  hub_->Drain();
  EXPECT_EQ(ReadAll(err_[0]),
            "[a:rank0]:  10%\n[b:rank1]: log\n[a:rank0]:  50%\r[a:rank0]: 100%\n");
}

TEST_F(ConsoleHubTest, AnAgentsOwnLineNamesItsHost) {
  HostStream a(hub_.get(), 2, "red01");
  a.Feed("[red01:rank0]: warn\ndrun: stopping on SIGTERM\n[red01:rank0]: bye\n");
  hub_->Drain();
  EXPECT_EQ(ReadAll(err_[0]),
            "[red01:rank0]: warn\ndrun: red01: stopping on SIGTERM\n[red01:rank0]: bye\n");
}

TEST_F(ConsoleHubTest, AnEndedStreamEndsItsOpenLine) {
  {
    HostStream a(hub_.get(), 1, "a");
    a.Feed("[a:rank0]: (Pdb) ");
  }
  hub_->Text("drun: the end\n");
  hub_->Drain();
  EXPECT_EQ(ReadAll(out_[0]), "[a:rank0]: (Pdb) \n");
  EXPECT_EQ(ReadAll(err_[0]), "drun: the end\n");
}

}  // namespace
}  // namespace drun
