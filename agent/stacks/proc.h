// What /proc says about a process and its threads, read without any ptrace
// permission where the kernel allows (stat, comm, task list, wchan), and its
// memory map (which needs the same permission as reading its memory).
// Errors carry the errno's canonical code: NotFound for a process that is
// gone, PermissionDenied for one we may not inspect.
#ifndef DRUN_AGENT_STACKS_PROC_H_
#define DRUN_AGENT_STACKS_PROC_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace drun::stacks {

// Reads a whole (small) file; errors carry errno.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t limit = 1 << 22);

struct ProcStat {
  char state = '?';
  std::string comm;
  double cpu_seconds = 0;  // utime + stime
};
// Parses /proc/PID/stat or /proc/PID/task/TID/stat text (comm may hold
// spaces and parentheses: the fields after the last ')' are counted).
absl::StatusOr<ProcStat> ParseStat(const std::string& text);
absl::StatusOr<ProcStat> ReadStat(const std::string& stat_path);

// Thread ids from /proc/PID/task, in directory order.
std::vector<int> ListTasks(pid_t pid);

// /proc/PID/wchan: "" for "0" (running) or unreadable.
std::string ReadWchan(pid_t pid);

// The real uid owning /proc/PID; -1 when unknown.
long ProcessUid(pid_t pid);

struct Mapping {
  uint64_t start = 0, end = 0, offset = 0;
  bool executable = false;
  std::string path;  // "" for anonymous mappings
};
absl::StatusOr<std::vector<Mapping>> ReadMaps(pid_t pid);

// kernel.yama.ptrace_scope, or -1 when Yama is not present.
int YamaPtraceScope();

}  // namespace drun::stacks

#endif  // DRUN_AGENT_STACKS_PROC_H_
