// Process primitives for the agent: spawning a child into its own process
// group, and the guardian that kills every live worker group if drun itself
// dies without cleaning up (kill -9, OOM killer).
#ifndef DRUN_AGENT_PROCESS_H_
#define DRUN_AGENT_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rendezvous/base/unique_fd.h"

namespace drun {

struct SpawnRequest {
  std::vector<std::string> argv;  // argv[0] is looked up on the env's PATH
  std::vector<std::string> env;   // "NAME=value"
  std::string cwd;                // empty: inherit
  int stdin_fd = -1;              // -1: inherit
  int stdout_fd = -1;             // -1: inherit
  int stderr_fd = -1;
  std::vector<int> cpus;          // non-empty: the child's CPU affinity (--numa-binding)
};

// Forks and execs `req` as the leader of a new process group (pgid == pid),
// with the default signal mask and dispositions, and PR_SET_PDEATHSIG=SIGKILL
// so the leader cannot outlive drun even before the guardian knows its group.
// The child sets its CPU affinity to req.cpus before exec, so every thread
// the program starts inherits it.
// An exec failure surfaces as the child exiting 127 (126: not executable),
// with a one-line reason on its stderr, like a shell.
absl::StatusOr<pid_t> SpawnProcessGroup(const SpawnRequest& req);

// Looks `file` up on `path` (a PATH value) the way execvp would; returns
// `file` unchanged when it contains a slash, "" when nothing is found.
std::string FindOnPath(const std::string& file, const std::string& path);

// What /proc/PID/stat says of a process: its state letter (R, S, D, T, Z) and
// the CPU time it used (user + system). Nothing when it is gone.
struct ProcStat {
  char state = '?';
  std::string comm;
  pid_t ppid = 0;
  double cpu_seconds = 0;
};
// Parses /proc/PID/stat or /proc/PID/task/TID/stat text (comm may hold
// spaces and parentheses: the fields after the last ')' are counted).
absl::StatusOr<ProcStat> ParseProcStat(absl::string_view text);
std::optional<ProcStat> ReadProcStat(pid_t pid);

// The guardian is a tiny child process forked at start-up (before any thread
// exists). drun tells it over a pipe which process groups are live; when the
// pipe closes without a clean "done" (drun died), it SIGKILLs every group it
// still knows and exits. It ignores terminal signals so a Ctrl-C cannot take
// it down before drun has finished its own cleanup.
class Guardian {
 public:
  // Returns a disabled guardian (all calls no-ops) if fork fails.
  static Guardian Start();
  Guardian() = default;
  Guardian(Guardian&& other) noexcept;
  Guardian& operator=(Guardian&& other) noexcept;
  Guardian(const Guardian&) = delete;
  Guardian& operator=(const Guardian&) = delete;
  ~Guardian();

  void Watch(pid_t pgid);
  void Forget(pid_t pgid);
  // A file or directory tree of drun's own (its temporary directory, its
  // control socket) that the guardian removes when drun dies without
  // cleaning up; `path` must be absolute, without a newline. A clean
  // Release() removes nothing: drun removes its own files then.
  void RemoveOnDeath(const std::string& path);
  // Clean shutdown: the guardian exits without killing anything.
  void Release();
  pid_t pid() const { return pid_; }

 private:
  void Send(char op, pid_t pgid);
  void SendLine(const std::string& line);
  UniqueFd fd_;  // the pipe to the guardian; closing it tells the guardian to act
  pid_t pid_ = -1;
};

// Marks this process as a child subreaper, so orphaned grandchildren of the
// workers are re-parented to drun and reaped by it.
void BecomeSubreaper();

// The children of this process it did not start itself: as a subreaper, the
// descendants of its workers that were orphaned (a worker's child in a
// session of its own, a daemon's double fork), whatever session or process
// group they moved to. `own`: the children it keeps (the guardian); the
// workers' leaders must be reaped already. Call from the main thread, which
// forks the workers and adopts orphans: reads /proc/self/task/PID/children,
// or every /proc/PID/stat where the kernel lacks that file.
std::vector<pid_t> AdoptedChildren(const std::vector<pid_t>& own);

// SIGKILLs and reaps the adopted children, and those adopted as they die in
// turn, until none is left; gives up waiting for one after `limit` (a
// process stuck in the kernel). Returns how many it killed.
int EndAdoptedChildren(const std::vector<pid_t>& own, std::chrono::milliseconds limit);

// drun's own files that a later drun of the same user removes once their
// owner is gone (drun and its guardian both SIGKILLed): the user's control
// directory (agent/control_socket.h) names them by pid: PID.sock, the `drun
// stacks` socket, and PID.tmp, a symbolic link to drun's temporary directory.
//
// Records `temp_dir` as this process's (DIR/PID.tmp; a stale link of a dead
// process of the same pid, with its directory, goes first). Returns the
// link's path, "" when it cannot be made.
std::string RecordTemporary(const std::string& control_dir, const std::string& temp_dir);
// Removes the entries PID.sock and PID.tmp of `control_dir` whose pid is not
// alive, and the directory each such PID.tmp names (a directory named drun-*
// of this user); returns how many entries it removed.
int RemoveStaleEntries(const std::string& control_dir);

}  // namespace drun

#endif  // DRUN_AGENT_PROCESS_H_
