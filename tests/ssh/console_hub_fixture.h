// A test fixture for the launchers' console (launcher/ssh/ssh_console.h): a
// ConsoleHub writing into two pipes the test reads back, and the launcher's
// loop reduced to its deadlines. Shared by the ssh console's and the Slurm
// relay's unit tests.
#ifndef DRUN_TESTS_SSH_CONSOLE_HUB_FIXTURE_H_
#define DRUN_TESTS_SSH_CONSOLE_HUB_FIXTURE_H_

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "launcher/ssh/ssh_console.h"

namespace drun {

// What `fd` holds now (non-blocking: returns as soon as nothing more is ready).
inline std::string ReadAll(int fd) {
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

class ConsoleHubFixture : public ::testing::Test {
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
  int out_[2], err_[2];
  std::unique_ptr<ConsoleHub> hub_;
};

}  // namespace drun

#endif  // DRUN_TESTS_SSH_CONSOLE_HUB_FIXTURE_H_
