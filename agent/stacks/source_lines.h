// The source line of a Python frame, shown under it as a traceback shows it,
// read from the file as the target process sees it: through /proc/PID/root
// (its mount namespace, a container's files) and, for a relative name,
// against /proc/PID/cwd; else the name as it is on this node. Each file is
// read once per SourceLines (at most 16 MiB of it); a name that is not a
// readable regular file (a FIFO, a device, "<string>") gives no line, and is
// never waited on. Not thread-safe: one per capture.
#ifndef DRUN_AGENT_STACKS_SOURCE_LINES_H_
#define DRUN_AGENT_STACKS_SOURCE_LINES_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace drun::stacks {

class SourceLines {
 public:
  explicit SourceLines(pid_t pid) : pid_(pid) {}

  // Line `line` (1-based) of `file`, without its leading and trailing white
  // space and capped at 500 bytes; "" when the file or the line is not there.
  std::string Line(const std::string& file, int line);

 private:
  const std::vector<std::string>& Lines(const std::string& file);

  pid_t pid_;
  std::map<std::string, std::vector<std::string>> files_;
};

}  // namespace drun::stacks

#endif  // DRUN_AGENT_STACKS_SOURCE_LINES_H_
