// Output handling for workers: splitting byte streams into whole lines,
// per-line rank prefixes, the console writer, and stderr tails for the
// root-cause summary.
//
// Promise: a console line is always one whole line of one worker (or a
// max_line-sized piece of an overlong one), never a mix of two writers.
#ifndef DRUN_AGENT_OUTPUT_H_
#define DRUN_AGENT_OUTPUT_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace drun {

// Accumulates bytes of one stream and yields complete lines, without their
// '\n'. A line longer than max_line is yielded in max_line pieces, so a
// worker that never prints a newline cannot make drun buffer without bound.
class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line = 64 * 1024) : max_line_(max_line) {}
  void Feed(absl::string_view data, const std::function<void(absl::string_view)>& on_line);
  // Yields the pending partial line (a last line without newline), if any.
  void Flush(const std::function<void(absl::string_view)>& on_line);
  bool has_pending() const { return !pending_.empty(); }

 private:
  size_t max_line_;
  std::string pending_;
};

// Keeps the last `capacity` lines.
class TailBuffer {
 public:
  explicit TailBuffer(size_t capacity = 20) : capacity_(capacity) {}
  void Add(absl::string_view line);
  std::vector<std::string> lines() const { return {lines_.begin(), lines_.end()}; }

 private:
  size_t capacity_;
  std::deque<std::string> lines_;
};

// torchrun's -r/--redirects and -t/--tee values: "0".."3" for every local
// rank, or "0:1,2:3" per local rank (ranks not listed get 0).
// Bit 1 = stdout, bit 2 = stderr.
struct StdSpec {
  int all = 0;
  std::map<int, int> per_rank;
  bool has_per_rank = false;
  int ForRank(int local_rank) const;
};
absl::StatusOr<StdSpec> ParseStdSpec(absl::string_view value);

// "0,2,3" (or empty for all) for --local-ranks-filter.
absl::StatusOr<std::vector<int>> ParseRankList(absl::string_view value);

// Buffers console output of one event-loop iteration and writes it in as few
// syscalls as possible. Lines of one stream keep their order.
class Console {
 public:
  Console(int out_fd = 1, int err_fd = 2);
  bool colour() const { return colour_; }
  // stream: 1 = stdout, 2 = stderr.
  void Line(int stream, absl::string_view prefix, absl::string_view line, int colour_index = -1);
  void Flush();

 private:
  int fds_[3];
  std::string buf_[3];
  bool colour_ = false;
};

// Writes all of `data` to `fd`, retrying on EINTR and short writes (and
// waiting for a non-blocking fd to drain).
void WriteAll(int fd, absl::string_view data);

}  // namespace drun

#endif  // DRUN_AGENT_OUTPUT_H_
