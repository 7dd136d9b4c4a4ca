// The worker group (agent/worker_group.h), its log pumps (agent/log_pump.h)
// and the subreaper's clean-up (agent/process.h) with real /bin/sh children,
// as ninja's subprocess_test.cc drives its SubprocessSet: a spawn that fails,
// an empty group, a stream both shown and logged (read exactly once), a full
// disk (/dev/full), a child that closes its stdout, a process that leaves its
// process group. The test drives the group as the agent's loop does: poll on
// the group's descriptors and one pidfd per worker, reap, sweep; every wait is
// for an event, bounded by a deadline that only a defect reaches.
#include "agent/worker_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/log_pump.h"
#include "agent/output.h"
#include "agent/process.h"

#include <gtest/gtest.h>

namespace drun {
namespace {

using std::chrono::seconds;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A temporary directory, removed with what it holds.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/drun-worker-group-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(absl::StrCat("rm -rf '", path_, "'").c_str()); }
  std::string File(const std::string& name) const { return absl::StrCat(path_, "/", name); }

 private:
  std::string path_;
};

WorkerLaunch Shell(int local_rank, const std::string& script) {
  WorkerLaunch l;
  l.local_rank = local_rank;
  l.rank = local_rank;
  l.prefix = absl::StrCat("[rank", local_rank, "]: ");
  l.cont_prefix = absl::StrCat("[rank", local_rank, "]+ ");
  l.request.argv = {"/bin/sh", "-c", script};
  l.request.env = {"PATH=/usr/bin:/bin"};
  return l;
}

class WorkerGroupTest : public ::testing::Test {
 protected:
  WorkerGroupTest() : console_file_(dir_.File("console")) {
    console_fd_.reset(open(console_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    console_ = std::make_unique<Console>(console_fd_.get(), console_fd_.get());
    group_ = std::make_unique<WorkerGroup>(&guardian_, console_.get());
  }

  absl::Status Start(std::vector<WorkerLaunch> launches) {
    absl::Status s = group_->Start(std::move(launches), Clock::now());
    for (pid_t pid : group_->pids()) {
      pidfds_[pid] = UniqueFd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
    }
    return s;
  }

  // One turn of the agent's loop: wait for a descriptor, read, reap, sweep.
  void Turn(TimePoint deadline) {
    std::vector<pollfd> fds;
    group_->AppendPollFds(&fds);
    const size_t pipes = fds.size();
    for (const auto& [pid, fd] : pidfds_) fds.push_back({fd.get(), POLLIN, 0});
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, left.count()))) < 0) return;
    for (size_t i = 0; i < pipes; ++i) {
      if (fds[i].revents) group_->OnReady(fds[i].fd, fds[i].revents);
    }
    int status;
    rusage ru{};
    pid_t pid;
    while ((pid = wait4(-1, &status, WNOHANG, &ru)) > 0) {
      group_->OnChildExit(pid, status, ru.ru_maxrss, Clock::now());
      pidfds_.erase(pid);
    }
    group_->Sweep();
    console_->Flush();
  }

  // Drives the group until it is done; false if 20 s pass first.
  bool Drive() {
    const TimePoint deadline = Clock::now() + seconds(20);
    while (!group_->done()) {
      if (Clock::now() > deadline) return false;
      Turn(deadline);
    }
    console_->Drain();
    return true;
  }

  std::string ConsoleText() {
    console_->Drain();
    return ReadFile(console_file_);
  }
  std::vector<std::string> ConsoleLines(const std::string& prefix) {
    std::vector<std::string> out;
    for (absl::string_view line : absl::StrSplit(ConsoleText(), '\n')) {
      if (absl::StartsWith(line, prefix)) out.emplace_back(line.substr(prefix.size()));
    }
    return out;
  }

  TempDir dir_;
  std::string console_file_;
  UniqueFd console_fd_;
  Guardian guardian_;  // disabled: nothing to guard against in a test
  std::unique_ptr<Console> console_;
  std::unique_ptr<WorkerGroup> group_;
  std::map<pid_t, UniqueFd> pidfds_;
};

// The text `seq 1 n` prints.
std::string Seq(int n) {
  std::string s;
  for (int i = 1; i <= n; ++i) absl::StrAppend(&s, i, "\n");
  return s;
}

TEST_F(WorkerGroupTest, AnEmptyGroupIsDoneAndDidNotSucceed) {
  ASSERT_TRUE(Start({}).ok());
  EXPECT_TRUE(group_->done());
  // A group that started nothing succeeded at nothing: a setup that did not
  // start must not read as one that succeeded (issue 30).
  EXPECT_FALSE(group_->all_succeeded());
  EXPECT_FALSE(group_->first_failure());
}

TEST_F(WorkerGroupTest, WorkersSucceedAndTheirOutputIsShownOnce) {
  ASSERT_TRUE(Start({Shell(0, "echo zero"), Shell(1, "echo one; echo oops >&2")}).ok());
  ASSERT_TRUE(Drive());
  EXPECT_TRUE(group_->all_succeeded());
  EXPECT_EQ(ConsoleLines("[rank0]: "), std::vector<std::string>({"zero"}));
  EXPECT_EQ(ConsoleLines("[rank1]: "), std::vector<std::string>({"one", "oops"}));
}

TEST_F(WorkerGroupTest, AFailureIsTheFirstNonZeroExitWithItsStderrTail) {
  ASSERT_TRUE(Start({Shell(0, "echo last words >&2; exit 3")}).ok());
  ASSERT_TRUE(Drive());
  ASSERT_TRUE(group_->first_failure());
  EXPECT_EQ(group_->first_failure()->exit_code, 3);
  EXPECT_EQ(group_->first_failure()->stderr_tail, std::vector<std::string>({"last words"}));
  EXPECT_FALSE(group_->all_succeeded());
}

TEST_F(WorkerGroupTest, AProgramNotFoundExits127LikeAShell) {
  WorkerLaunch l = Shell(0, "");
  l.request.argv = {"drun-no-such-program"};
  ASSERT_TRUE(Start({l}).ok());
  ASSERT_TRUE(Drive());
  ASSERT_TRUE(group_->first_failure());
  EXPECT_EQ(group_->first_failure()->exit_code, 127);
}

// A spawn that fails (here an empty command) after others started: Start
// says why, and what did start is killed at once, so that no worker of a
// round that could not start runs on (issue 31, item 4).
TEST_F(WorkerGroupTest, ASpawnFailureStopsWhatStarted) {
  WorkerLaunch broken = Shell(2, "");
  broken.request.argv.clear();
  absl::Status s = Start({Shell(0, "exec sleep 30"), Shell(1, "exec sleep 30"), broken});
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  ASSERT_TRUE(Drive());
  const std::vector<WorkerRecord> started = group_->records();
  ASSERT_EQ(started.size(), 2u);
  for (const WorkerRecord& r : started) {
    EXPECT_EQ(r.signal, SIGKILL) << "rank " << r.rank;
    EXPECT_TRUE(r.stopped_by_drun) << "rank " << r.rank;
  }
  EXPECT_FALSE(group_->all_succeeded());
  EXPECT_FALSE(group_->first_failure()) << "stopped by drun: no worker's failure";
}

// Descriptors certain to run out (ulimit -n): Start says so with the figures
// and the fix, and starts none.
TEST_F(WorkerGroupTest, TooFewDescriptorsStartNone) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  // The limit lies just past the ninth free descriptor: 6 workers need 12 and more.
  int fd = 0;
  for (int free_seen = 0; free_seen < 9; ++fd) free_seen += fcntl(fd, F_GETFD) == -1;
  rlimit low = old;
  low.rlim_cur = static_cast<rlim_t>(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<WorkerLaunch> launches;
  for (int i = 0; i < 6; ++i) launches.push_back(Shell(i, "exec sleep 30"));
  absl::Status s = Start(std::move(launches));
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_NE(s.message().find("6 workers need about"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("ulimit -n is "), absl::string_view::npos) << s;
  EXPECT_TRUE(group_->records().empty());
  EXPECT_TRUE(group_->done());
  EXPECT_FALSE(group_->all_succeeded());
}

TEST_F(WorkerGroupTest, AChildThatClosesItsStdoutGoesOnAndFinishes) {
  ASSERT_TRUE(Start({Shell(0, "echo before; exec >&-; echo after >&2; exit 0")}).ok());
  ASSERT_TRUE(Drive());
  EXPECT_TRUE(group_->all_succeeded());
  EXPECT_EQ(ConsoleLines("[rank0]: "), std::vector<std::string>({"before", "after"}));
}

// A stream both shown and logged: this loop tee(2)s it into the pump's pipe
// and reads it itself; the file and the console each get every byte once.
TEST_F(WorkerGroupTest, ATeedStreamReachesItsLogAndTheConsoleExactlyOnce) {
  WorkerLaunch l = Shell(0, "seq 1 50000");
  l.stdout_file = dir_.File("out.log");
  ASSERT_TRUE(Start({l}).ok());
  ASSERT_TRUE(Drive());
  EXPECT_TRUE(group_->all_succeeded());
  EXPECT_EQ(ReadFile(l.stdout_file), Seq(50000));
  std::string shown;
  for (const std::string& line : ConsoleLines("[rank0]: ")) absl::StrAppend(&shown, line, "\n");
  EXPECT_EQ(shown, Seq(50000));
  EXPECT_TRUE(group_->incomplete_logs().empty());
}

// A stream only logged: the pump reads the worker's pipe itself.
TEST_F(WorkerGroupTest, ALoggedOnlyStreamReachesItsLogAlone) {
  WorkerLaunch l = Shell(0, "seq 1 50000");
  l.stdout_file = dir_.File("out.log");
  l.console_stdout = false;
  ASSERT_TRUE(Start({l}).ok());
  ASSERT_TRUE(Drive());
  EXPECT_EQ(ReadFile(l.stdout_file), Seq(50000));
  EXPECT_TRUE(ConsoleLines("[rank0]: ").empty());
}

// A full disk: the log is given up with one warning; the worker is never
// held back and the console still shows every line.
TEST_F(WorkerGroupTest, AFullDiskCutsTheLogNotTheWorker) {
  WorkerLaunch l = Shell(0, "seq 1 50000");
  l.stdout_file = "/dev/full";
  ASSERT_TRUE(Start({l}).ok());
  ASSERT_TRUE(Drive());
  EXPECT_TRUE(group_->all_succeeded());
  EXPECT_EQ(group_->incomplete_logs(), std::vector<std::string>({"/dev/full"}));
  EXPECT_EQ(ConsoleLines("[rank0]: ").size(), 50000u);
  const std::string text = ConsoleText();
  EXPECT_NE(text.find("drun: warning: cannot write the log /dev/full: No space left on device"),
            std::string::npos)
      << text;
}

// A process that left the worker's process group (setsid) and keeps its
// stdout open: the worker is finished once its leader is reaped and its
// group empty, without waiting for an end-of-file that never comes.
TEST_F(WorkerGroupTest, AnEscapedProcessHoldingThePipeDoesNotHoldTheGroup) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);  // the escapee comes back to this test
  // Popen returns once its child has called setsid() and exec'd: no race
  // with the leader's exit, which kills what is still in its process group.
  ASSERT_TRUE(Start({Shell(0, "exec /usr/bin/python3 -c 'import subprocess; "
                              "subprocess.Popen([\"sleep\", \"30\"], start_new_session=True); "
                              "print(\"started\")'")})
                  .ok());
  ASSERT_TRUE(Drive());
  EXPECT_TRUE(group_->all_succeeded());
  EXPECT_EQ(ConsoleLines("[rank0]: "), std::vector<std::string>({"started"}));
  // It is this process's child now, as the agent's: ended and reaped.
  EXPECT_EQ(AdoptedChildren({}).size(), 1u);
  EXPECT_EQ(EndAdoptedChildren({}, std::chrono::seconds(10)), 1);
  EXPECT_TRUE(AdoptedChildren({}).empty());
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

// --- LogPump alone ----------------------------------------------------------

class LogPumpTest : public ::testing::Test {
 protected:
  // Starts `script` with its stdout on a pipe whose read end the pump gets,
  // with `file` as its log; returns the child's pid.
  pid_t StartChild(const std::string& script, const std::string& file) {
    int p[2];
    EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
    UniqueFd read_end(p[0]), write_end(p[1]);
    fcntl(read_end.get(), F_SETFL, O_NONBLOCK);
    SpawnRequest req;
    req.argv = {"/bin/sh", "-c", script};
    req.env = {"PATH=/usr/bin:/bin"};
    req.stdout_fd = write_end.get();
    absl::StatusOr<pid_t> pid = SpawnProcessGroup(req);
    EXPECT_TRUE(pid.ok());
    id_ = pump_.Add(std::move(read_end),
                    UniqueFd(open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)));
    EXPECT_TRUE(pump_.Start().ok());
    return *pid;
  }
  // The pump's events until the stream ended (or 20 s passed).
  std::vector<LogPump::Event> EventsUntilEnded() {
    std::vector<LogPump::Event> all;
    const TimePoint deadline = Clock::now() + seconds(20);
    while (Clock::now() < deadline) {
      pollfd p{pump_.wake_fd(), POLLIN, 0};
      poll(&p, 1, 1000);
      for (const LogPump::Event& e : pump_.TakeEvents()) {
        all.push_back(e);
        if (e.ended) return all;
      }
    }
    return all;
  }

  TempDir dir_;
  LogPump pump_;
  int id_ = -1;
};

TEST_F(LogPumpTest, MovesExactlyThePipesBytes) {
  const std::string log = dir_.File("log");
  const pid_t pid = StartChild("seq 1 100000", log);
  ASSERT_EQ(waitpid(pid, nullptr, 0), pid);  // it wrote everything: the pump kept reading
  pump_.Finish(id_);
  const std::vector<LogPump::Event> events = EventsUntilEnded();
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events.back().ended);
  for (const LogPump::Event& e : events) EXPECT_EQ(e.error, 0);
  EXPECT_EQ(ReadFile(log), Seq(100000));
  EXPECT_EQ(pump_.moved(id_), Seq(100000).size());
}

TEST_F(LogPumpTest, AFailedWriteIsReportedOnceAndTheStreamDrains) {
  const pid_t pid = StartChild("seq 1 100000", "/dev/full");
  // Had the pump stopped reading at the error, the child would block on a
  // full pipe and never exit.
  ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
  pump_.Finish(id_);
  const std::vector<LogPump::Event> events = EventsUntilEnded();
  int errors = 0;
  for (const LogPump::Event& e : events) {
    if (e.error != 0) {
      ++errors;
      EXPECT_EQ(e.error, ENOSPC);
    }
  }
  EXPECT_EQ(errors, 1);
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events.back().ended);
  EXPECT_EQ(pump_.moved(id_), Seq(100000).size());
}

TEST_F(LogPumpTest, AChildThatClosesItsStdoutEndsTheStream) {
  const std::string log = dir_.File("log");
  // It closes stdout and goes on: the stream ends with its end-of-file.
  const pid_t pid = StartChild("echo one; exec >&-; exec sleep 30", log);
  const std::vector<LogPump::Event> events = EventsUntilEnded();
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events.back().ended);
  EXPECT_EQ(ReadFile(log), "one\n");
  kill(-pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

}  // namespace
}  // namespace drun
