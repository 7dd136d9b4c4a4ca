// The guardian (agent/process.h) with real processes: when drun dies without
// cleaning up, its worker groups are killed and its own files removed; a clean
// Release leaves both alone. Waits on pidfds, never on time.
#include "agent/process.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace drun {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

// Blocks until `pid` (not our child) has exited; false after 20 s.
bool WaitGone(pid_t pid) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  pollfd p{fd, POLLIN, 0};
  const int n = poll(&p, 1, 20000);
  close(fd);
  return n == 1;
}

struct Dead {
  pid_t guardian = -1;
  pid_t worker = -1;
};

// A child plays drun: starts a guardian, a worker group that sleeps, and
// registers `dir`; then exits cleanly (Release) or dies (_exit without it).
Dead PlayDrun(const std::string& dir, bool clean) {
  int p[2];
  EXPECT_EQ(pipe(p), 0);
  pid_t drun = fork();
  if (drun == 0) {
    close(p[0]);
    Guardian g = Guardian::Start();
    SpawnRequest req;
    req.argv = {"/bin/sleep", "600"};
    req.env = {"PATH=/bin:/usr/bin"};
    auto worker = SpawnProcessGroup(req);
    if (!worker.ok()) _exit(3);
    g.Watch(*worker);
    g.RemoveOnDeath(dir);
    Dead d{g.pid(), *worker};
    if (write(p[1], &d, sizeof d) != sizeof d) _exit(4);
    if (clean) {
      g.Release();
      _exit(0);
    }
    _exit(9);  // as kill -9 would: the guardian's pipe closes without "done"
  }
  close(p[1]);
  Dead d;
  EXPECT_EQ(read(p[0], &d, sizeof d), static_cast<ssize_t>(sizeof d));
  close(p[0]);
  int status = 0;
  waitpid(drun, &status, 0);
  return d;
}

std::string MakeDir() {
  char tmpl[] = "/tmp/drun-guardian-test-XXXXXX";
  EXPECT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::ofstream(dir + "/error.json") << "{}";
  EXPECT_EQ(mkdir((dir + "/sub").c_str(), 0700), 0);
  std::ofstream(dir + "/sub/file") << "x";
  EXPECT_EQ(symlink("/etc", (dir + "/link").c_str()), 0);
  return dir;
}

TEST(GuardianTest, DeathKillsTheGroupsAndRemovesDrunsFiles) {
  const std::string dir = MakeDir();
  Dead d = PlayDrun(dir, /*clean=*/false);
  ASSERT_GT(d.guardian, 0);
  ASSERT_TRUE(WaitGone(d.guardian));
  EXPECT_TRUE(WaitGone(d.worker));
  EXPECT_FALSE(Exists(dir));
  EXPECT_TRUE(Exists("/etc/hostname") || Exists("/etc/passwd"));  // the link was not followed
}

TEST(GuardianTest, ACleanReleaseRemovesNothing) {
  const std::string dir = MakeDir();
  Dead d = PlayDrun(dir, /*clean=*/true);
  ASSERT_TRUE(WaitGone(d.guardian));
  EXPECT_TRUE(Exists(dir + "/sub/file"));
  kill(-d.worker, SIGKILL);  // a clean drun stops its own workers; this play did not
  EXPECT_TRUE(WaitGone(d.worker));
  const std::string rm = "rm -rf " + dir;
  EXPECT_EQ(system(rm.c_str()), 0);
}

}  // namespace
}  // namespace drun
