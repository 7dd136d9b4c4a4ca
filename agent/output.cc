#include "agent/output.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace drun {

void LineSplitter::Feed(absl::string_view data,
                        const std::function<void(absl::string_view)>& on_line) {
  while (!data.empty()) {
    size_t nl = data.find('\n');
    if (nl == absl::string_view::npos) {
      // No newline: keep it, but never more than max_line.
      while (pending_.size() + data.size() >= max_line_) {
        size_t take = max_line_ - pending_.size();
        pending_.append(data.data(), take);
        on_line(pending_);
        pending_.clear();
        data.remove_prefix(take);
      }
      pending_.append(data.data(), data.size());
      return;
    }
    absl::string_view piece = data.substr(0, nl);
    if (pending_.empty() && piece.size() < max_line_) {
      on_line(piece);  // the common case: no copy
    } else {
      pending_.append(piece.data(), piece.size());
      absl::string_view rest = pending_;
      while (rest.size() > max_line_) {
        on_line(rest.substr(0, max_line_));
        rest.remove_prefix(max_line_);
      }
      on_line(rest);
      pending_.clear();
    }
    data.remove_prefix(nl + 1);
  }
}

void LineSplitter::Flush(const std::function<void(absl::string_view)>& on_line) {
  if (pending_.empty()) return;
  on_line(pending_);
  pending_.clear();
}

void TailBuffer::Add(absl::string_view line) {
  lines_.emplace_back(line);
  while (lines_.size() > capacity_) lines_.pop_front();
}

int StdSpec::ForRank(int local_rank) const {
  if (!has_per_rank) return all;
  auto it = per_rank.find(local_rank);
  return it == per_rank.end() ? 0 : it->second;
}

absl::StatusOr<StdSpec> ParseStdSpec(absl::string_view value) {
  StdSpec spec;
  auto bad = [&]() {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", value, "' is not a valid value: write 0 (none), 1 (stdout), 2 (stderr), 3 (both), "
                    "or per local rank like 0:3,1:2"));
  };
  value = absl::StripAsciiWhitespace(value);
  if (value.empty()) return spec;
  if (value.find(':') == absl::string_view::npos) {
    int v;
    if (!absl::SimpleAtoi(value, &v) || v < 0 || v > 3) return bad();
    spec.all = v;
    return spec;
  }
  spec.has_per_rank = true;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, absl::MaxSplits(':', 1));
    int rank, v;
    if (!absl::SimpleAtoi(kv.first, &rank) || !absl::SimpleAtoi(kv.second, &v) || rank < 0 ||
        v < 0 || v > 3) {
      return bad();
    }
    spec.per_rank[rank] = v;
  }
  return spec;
}

absl::StatusOr<std::vector<int>> ParseRankList(absl::string_view value) {
  std::vector<int> out;
  value = absl::StripAsciiWhitespace(value);
  if (value.empty()) return out;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    int r;
    if (!absl::SimpleAtoi(part, &r) || r < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", value, "' is not a list of ranks: write e.g. 0 or 0,2,3"));
    }
    out.push_back(r);
  }
  return out;
}

Console::Console(int out_fd, int err_fd) {
  fds_[0] = -1;
  fds_[1] = out_fd;
  fds_[2] = err_fd;
  const char* term = getenv("TERM");
  colour_ = isatty(out_fd) && getenv("NO_COLOR") == nullptr &&
            !(term && absl::string_view(term) == "dumb");
}

void Console::Line(int stream, absl::string_view prefix, absl::string_view line, int colour_index) {
  std::string& b = buf_[stream == 2 ? 2 : 1];
  if (colour_ && colour_index >= 0) {
    static const int kColours[] = {32, 34, 35, 36, 33, 92, 94, 95, 96, 93};
    absl::StrAppend(&b, "\033[", kColours[colour_index % 10], "m", prefix, "\033[0m", line, "\n");
  } else {
    absl::StrAppend(&b, prefix, line, "\n");
  }
  if (b.size() > (1 << 16)) Flush();
}

void Console::Flush() {
  for (int s : {1, 2}) {
    if (!buf_[s].empty()) {
      WriteAll(fds_[s], buf_[s]);
      buf_[s].clear();
    }
  }
}

void WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, -1);
    } else {
      return;  // EPIPE or a closed console: output is lost, the job goes on
    }
  }
}

}  // namespace drun
