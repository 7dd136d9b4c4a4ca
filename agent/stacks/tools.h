// External stack tools (eu-stack, gdb, py-spy): running one with a deadline,
// and turning its text output into frames. None is required: a caller finds
// them with FindTool and falls back (stacks.cc) when one is missing.
#ifndef DRUN_AGENT_STACKS_TOOLS_H_
#define DRUN_AGENT_STACKS_TOOLS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/stacks/stacks.h"

namespace drun::stacks {

// The full path of `name` on this process's PATH, "" when absent.
std::string FindTool(const std::string& name);

// Runs argv[0] (a full path) without a shell, stdin from /dev/null, stderr
// discarded, LC_ALL=C, in its own process group; returns its stdout (capped
// at 16 MiB) whatever its exit status, since the tools exit non-zero when one
// frame of many could not be unwound. DeadlineExceeded when it overran
// `timeout`: its process group is then killed by its pid and reaped.
absl::StatusOr<std::string> RunTool(const std::vector<std::string>& argv, absl::Duration timeout);

// Frames of one thread as a tool reported them.
struct ToolThread {
  int tid = 0;  // 0 when the tool did not give an OS thread id
  std::string name;
  std::vector<Frame> frames;  // innermost first
};

// `eu-stack -m [-s] -p PID`: "TID n:" headers, "#i 0xADDR function - module"
// frames, each optionally followed by an indented "file:line[:col]" line.
std::vector<ToolThread> ParseEuStack(absl::string_view out);

// `gdb -batch -ex "thread apply all bt"`: "Thread n (... (LWP tid) "name"):"
// headers and "#i [0xADDR in ]function (args) [at file:line | from module]".
std::vector<ToolThread> ParseGdb(absl::string_view out);

// `py-spy dump`: `Thread ID (status): "name"` headers and
// `    function (file:line)` frames.
std::vector<ToolThread> ParsePySpy(absl::string_view out);

}  // namespace drun::stacks

#endif  // DRUN_AGENT_STACKS_TOOLS_H_
