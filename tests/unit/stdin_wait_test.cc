// agent/stdin_wait.h: whether a worker waits for input on its stdin pipe, as
// /proc says of real child processes (read, select, a grandchild in its
// process group) and of one that does something else (sleeps).
#include "agent/stdin_wait.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include <gtest/gtest.h>

namespace drun {
namespace {

TEST(ParseSyscallLineTest, ABlockedCallHasItsNumberAndSixArguments) {
  std::optional<BlockedCall> c = ParseSyscallLine("0 0x0 0x7ffc10 0x2000 0x0 0x0 0x0 0x7ffc00 0x7f12\n");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->nr, 0);
  EXPECT_EQ(c->args[1], 0x7ffc10u);
  EXPECT_EQ(c->args[2], 0x2000u);
  EXPECT_FALSE(ParseSyscallLine("running\n").has_value());
  EXPECT_FALSE(ParseSyscallLine("-1 0x7ffc00 0x7f12\n").has_value());
  EXPECT_FALSE(ParseSyscallLine("").has_value());
}

// A child in a process group of its own (as a worker is) with a pipe for its
// stdin, running `/bin/sh -c script`.
struct Child {
  pid_t pid = -1;
  int stdin_w = -1;
  explicit Child(const char* script) {
    int p[2];
    EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
    pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      dup2(p[0], 0);
      execl("/bin/sh", "sh", "-c", script, static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(pid, pid);
    close(p[0]);
    stdin_w = p[1];
  }
  ~Child() {
    kill(-pid, SIGKILL);
    close(stdin_w);
    waitpid(pid, nullptr, 0);
  }
};

// Until /proc says `want` (it needs the child to reach its call: a bounded
// poll on the kernel's word, never a delay that makes anything happen).
StdinWait Await(pid_t pid, StdinWait want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  StdinWait got = WorkerWaitsForStdin(pid);
  while (got != want && std::chrono::steady_clock::now() < deadline) {
    usleep(10000);
    got = WorkerWaitsForStdin(pid);
  }
  return got;
}

TEST(WorkerWaitsForStdinTest, AProcessReadingItsStdinPipeWaits) {
  Child c("read line; echo \"$line\" > /dev/null");
  EXPECT_EQ(Await(c.pid, StdinWait::kWaiting), StdinWait::kWaiting);
}

TEST(WorkerWaitsForStdinTest, ASleepingProcessDoesNotWaitAndAReadingGrandchildDoes) {
  Child sleeper("exec sleep 600");
  // Its exec may not have happened yet: wait until sleep blocks (not waiting),
  // which it then stays.
  EXPECT_EQ(Await(sleeper.pid, StdinWait::kNotWaiting), StdinWait::kNotWaiting);
  Child wrapper("cat > /dev/null; true");  // sh waits for cat, which reads the inherited pipe
  EXPECT_EQ(Await(wrapper.pid, StdinWait::kWaiting), StdinWait::kWaiting);
}

TEST(WorkerWaitsForStdinTest, AWorkerThatEndedWaitsNoMore) {
  // Ended but not reaped yet (a zombie: no descriptors left), as a worker is
  // between its exit and the agent's wait.
  Child c("read line");
  EXPECT_EQ(Await(c.pid, StdinWait::kWaiting), StdinWait::kWaiting);
  ASSERT_EQ(write(c.stdin_w, "x\n", 2), 2);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(c.pid), &info, WEXITED | WNOWAIT), 0);  // a zombie now
  EXPECT_EQ(WorkerWaitsForStdin(c.pid), StdinWait::kNotWaiting);
}

TEST(WorkerWaitsForStdinTest, AProcessSelectingOnItsStdinWaits) {
  Child c("exec /usr/bin/python3 -c 'import select, sys; select.select([sys.stdin], [], [])'");
  EXPECT_EQ(Await(c.pid, StdinWait::kWaiting), StdinWait::kWaiting);
}

TEST(WorkerWaitsForStdinTest, AnAsyncioReaderOfItsStdinWaits) {
  // asyncio's event loop blocks in epoll_wait on an instance watching the pipe.
  Child c("exec /usr/bin/python3 -c '"
          "import asyncio, sys\n"
          "async def main():\n"
          "    r = asyncio.StreamReader()\n"
          "    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(r), sys.stdin)\n"
          "    await r.readline()\n"
          "asyncio.run(main())'");
  EXPECT_EQ(Await(c.pid, StdinWait::kWaiting), StdinWait::kWaiting);
}

}  // namespace
}  // namespace drun
