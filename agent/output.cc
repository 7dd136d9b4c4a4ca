#include "agent/output.h"

#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rendezvous/base/words.h"

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

namespace {

constexpr char kFrameMark = '\x1e';
constexpr char kFrameTagEnd = '\x1f';
constexpr char kFramePrefixEnd = '\x1d';  // between a source tag's two prefixes
// The agent's own bytes: the line ends / a piece of it.
constexpr char kFrameEndsLine = 'L';
constexpr char kFramePiece = 'P';
// A worker stream's bytes: the line ends / a piece of it.
constexpr char kFrameSourceEndsLine = 'W';
constexpr char kFrameSourcePiece = 'V';

void AppendFrame(std::string* out, char kind, absl::string_view tag, absl::string_view bytes) {
  out->push_back(kFrameMark);
  out->push_back(kind);
  out->append(tag.data(), tag.size());
  out->push_back(kFrameTagEnd);
  out->append(bytes.data(), bytes.size());
  out->push_back('\n');
}

std::string EncodeFrames(char ends, char piece, absl::string_view tag, absl::string_view data) {
  const size_t header = tag.size() + 4;  // mark, kind, tag end, newline
  const size_t room = RelayFrames::kFrameMax > header + 64 ? RelayFrames::kFrameMax - header : 64;
  std::string out;
  out.reserve(data.size() + 2 * header);
  while (!data.empty()) {
    const size_t nl = data.find('\n');
    const size_t line = nl == absl::string_view::npos ? data.size() : nl;
    const size_t take = std::min(line, room);
    const bool line_ends = take == line && nl != absl::string_view::npos;
    AppendFrame(&out, line_ends ? ends : piece, tag, data.substr(0, take));
    data.remove_prefix(line_ends ? take + 1 : take);
  }
  return out;
}

}  // namespace

std::string RelayFrames::Encode(absl::string_view host, absl::string_view data) {
  return EncodeFrames(kFrameEndsLine, kFramePiece, host, data);
}

std::string RelayFrames::EncodeSource(absl::string_view prefix, absl::string_view cont_prefix,
                                      int colour_index, absl::string_view data) {
  const absl::string_view sep(&kFramePrefixEnd, 1);
  return EncodeFrames(kFrameSourceEndsLine, kFrameSourcePiece,
                      absl::StrCat(prefix, sep, cont_prefix, sep, colour_index), data);
}

void RelayDecoder::Feed(absl::string_view data, const Sink& sink) {
  while (!data.empty()) {
    const size_t nl = data.find('\n');
    if (nl == absl::string_view::npos) {
      pending_.append(data.data(), data.size());
      if (pending_.size() >= kMaxPending) {  // no frame is this long
        sink(RelayOrigin{}, pending_);
        pending_.clear();
      }
      return;
    }
    if (pending_.empty()) {
      Line(data.substr(0, nl + 1), sink);
    } else {
      pending_.append(data.data(), nl + 1);
      Line(pending_, sink);
      pending_.clear();
    }
    data.remove_prefix(nl + 1);
  }
}

void RelayDecoder::Finish(const Sink& sink) {
  if (pending_.empty()) return;
  sink(RelayOrigin{}, pending_);
  pending_.clear();
}

void RelayDecoder::Line(absl::string_view line, const Sink& sink) {
  const size_t tag_end = line.find(kFrameTagEnd);
  const char kind = line.size() >= 4 ? line[1] : '\0';
  const bool agent = kind == kFrameEndsLine || kind == kFramePiece;
  const bool source = kind == kFrameSourceEndsLine || kind == kFrameSourcePiece;
  const absl::string_view tag = tag_end == absl::string_view::npos ? "" : line.substr(2, tag_end - 2);
  // A source's tag: prefix, continuation prefix, colour index.
  std::vector<absl::string_view> parts = absl::StrSplit(tag, kFramePrefixEnd);
  int colour = -1;
  if (line[0] != kFrameMark || tag_end == absl::string_view::npos || !(agent || source) ||
      (source && (parts.size() != 3 || !absl::SimpleAtoi(parts[2], &colour)))) {
    sink(RelayOrigin{}, line);
    return;
  }
  absl::string_view bytes = line.substr(tag_end + 1);  // with the line's '\n'
  if (kind == kFramePiece || kind == kFrameSourcePiece) bytes.remove_suffix(1);
  RelayOrigin origin;
  if (agent) {
    origin.kind = RelayOrigin::Kind::kAgent;
    origin.host = tag;
  } else {
    origin.kind = RelayOrigin::Kind::kSource;
    origin.prefix = parts[0];
    origin.cont_prefix = parts[1];
    origin.colour_index = colour;
  }
  sink(origin, bytes);
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

void RawTail::Add(absl::string_view data) {
  if (data.size() >= capacity_) {
    bytes_ = std::string(data.substr(data.size() - capacity_));
    return;
  }
  bytes_.append(data.data(), data.size());
  // Trim in batches so a stream of small writes costs no memmove per write.
  if (bytes_.size() > 2 * capacity_) bytes_.erase(0, bytes_.size() - capacity_);
}

std::vector<std::string> RawTail::lines(size_t max_lines) const {
  absl::string_view all = bytes_;
  const bool cut = all.size() > capacity_;
  if (cut) all.remove_prefix(all.size() - capacity_);
  if (!all.empty() && all.back() == '\n') all.remove_suffix(1);
  std::vector<std::string> out = absl::StrSplit(all, '\n');
  if (all.empty()) out.clear();
  if (out.size() > max_lines) out.erase(out.begin(), out.end() - max_lines);
  return out;
}

absl::StatusOr<v1::JobSpec::StdinTarget> ParseStdinTarget(absl::string_view value) {
  v1::JobSpec::StdinTarget t;
  value = absl::StripAsciiWhitespace(value);
  int rank = 0;
  if (value.empty()) return t;  // the default: rank 0
  if (value == "all") {
    t.set_mode(v1::JobSpec::StdinTarget::ALL);
  } else if (value == "none") {
    t.set_mode(v1::JobSpec::StdinTarget::NONE);
  } else if (absl::SimpleAtoi(value, &rank) && rank >= 0) {
    t.set_rank(rank);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", value, "' is not a valid value: write a global rank (e.g. 0), all or none"));
  }
  return t;
}

bool StdinIncludes(const v1::JobSpec::StdinTarget& target, int rank) {
  switch (target.mode()) {
    case v1::JobSpec::StdinTarget::ALL:
      return true;
    case v1::JobSpec::StdinTarget::NONE:
      return false;
    default:
      return target.rank() == rank;
  }
}

std::optional<Streams> Streams::FromDigit(int digit) {
  if (digit < 0 || digit > 3) return std::nullopt;
  return Streams{(digit & 1) != 0, (digit & 2) != 0};
}

Streams StdSpec::ForRank(int local_rank) const {
  if (!has_per_rank) return all;
  auto it = per_rank.find(local_rank);
  return it == per_rank.end() ? Streams::None() : it->second;
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
    std::optional<Streams> streams;
    if (!absl::SimpleAtoi(value, &v) || !(streams = Streams::FromDigit(v))) return bad();
    spec.all = *streams;
    return spec;
  }
  spec.has_per_rank = true;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, absl::MaxSplits(':', 1));
    int rank, v;
    std::optional<Streams> streams;
    if (!absl::SimpleAtoi(kv.first, &rank) || !absl::SimpleAtoi(kv.second, &v) || rank < 0 ||
        !(streams = Streams::FromDigit(v))) {
      return bad();
    }
    spec.per_rank[rank] = *streams;
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

namespace {

bool IsDevNull(int fd) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && S_ISCHR(a.st_mode) && stat("/dev/null", &b) == 0 &&
         a.st_rdev == b.st_rdev;
}

std::string Coloured(absl::string_view prefix, int colour_index) {
  static const int kColours[] = {32, 34, 35, 36, 33, 92, 94, 95, 96, 93};
  return absl::StrCat("\033[", kColours[colour_index % 10], "m", prefix, "\033[0m");
}

bool SameTerminal(int a, int b) {
  struct stat sa, sb;
  return isatty(a) && isatty(b) && fstat(a, &sa) == 0 && fstat(b, &sb) == 0 &&
         sa.st_rdev == sb.st_rdev;
}

// The terminal's columns and rows (80x24 when it does not say).
std::pair<size_t, size_t> WindowSize(int fd) {
  winsize ws{};
  if (ioctl(fd, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0 || ws.ws_row == 0) return {80, 24};
  return {ws.ws_col, ws.ws_row};
}

// Appends the longest start of `text` that shows in at most `*cols` columns
// (escape sequences and UTF-8 continuation bytes take none); lowers *cols.
// Returns whether an escape sequence was cut or passed (colour may be on).
bool AppendColumns(absl::string_view text, size_t* cols, std::string* out) {
  bool escapes = false;
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = 1;
    size_t width = 1;
    if (c == 0x1b) {
      escapes = true;
      width = 0;
      if (i + 1 < text.size() && text[i + 1] == '[') {
        len = 2;
        while (i + len < text.size() && !(text[i + len] >= 0x40 && text[i + len] <= 0x7e)) ++len;
        len = std::min(len + 1, text.size() - i);
      } else {
        len = std::min<size_t>(2, text.size() - i);
      }
    } else if ((c & 0xc0) == 0x80 || c < 0x20) {
      width = 0;
    }
    if (width > *cols) break;
    *cols -= width;
    out->append(text.data() + i, len);
    i += len;
  }
  return escapes;
}

}  // namespace

Console::Console(int out_fd, int err_fd) {
  fds_[1] = out_fd;
  fds_[2] = err_fd;
  const char* term = getenv("TERM");
  colour_ = isatty(out_fd) && getenv("NO_COLOR") == nullptr &&
            !(term && absl::string_view(term) == "dumb");
  for (int s : {1, 2}) {
    struct stat st;
    if (fds_[s] < 0 || fstat(fds_[s], &st) != 0) continue;
    if (IsDevNull(fds_[s])) {
      discard_[s] = true;
    } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
      // A bigger pipe to the reader (| less, | tee) means fewer wake-ups on
      // both sides; the kernel may refuse, which only costs speed.
      if (S_ISFIFO(st.st_mode)) fcntl(fds_[s], F_SETPIPE_SZ, 1 << 20);
      // A private open file description: O_NONBLOCK on the inherited one
      // would leak into the shell that started drun.
      int fd = open(absl::StrCat("/proc/self/fd/", fds_[s]).c_str(),
                    O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
      if (fd >= 0) {
        fds_[s] = fd;
        own_fd_[s] = true;
      }
    }
  }
  // A terminal gets the live region; stdout and stderr on one terminal share
  // a queue, so the region's cursor movements and both streams stay in order.
  if (fds_[1] >= 0 && isatty(fds_[1])) {
    term_queue_ = 1;
    if (fds_[2] >= 0 && SameTerminal(fds_[1], fds_[2])) queue_of_[2] = 1;
  } else if (fds_[2] >= 0 && isatty(fds_[2])) {
    term_queue_ = 2;
  }
}

void Console::RelayFramed(std::string host) {
  relay_host_ = std::move(host);
  colour_ = false;
  term_queue_ = 0;
  queue_of_[1] = 1;
  queue_of_[2] = 2;
}

void Console::FrameQueue(int q) {
  std::string& b = queue_[q];
  if (!relay_host_ || framed_[q] >= b.size()) return;
  std::string frames = RelayFrames::Encode(*relay_host_, absl::string_view(b).substr(framed_[q]));
  b.replace(framed_[q], std::string::npos, frames);
  framed_[q] = b.size();
}

void Console::RelaySend(Source& s, absl::string_view bytes) {
  const int q = Queue(s.stream);
  FrameQueue(q);  // drun's own lines before these bytes, framed as such
  queue_[q].append(RelayFrames::EncodeSource(s.prefix, s.cont_prefix, s.colour_index, bytes));
  framed_[q] = queue_[q].size();
  s.need_prefix = bytes.back() == '\n';  // false: the line is open on the launcher's console
}

// Whole lines go at once; a partial line waits kPartialDelay (ShowPartials),
// so a bar drawn a character at a time costs a frame per redraw at most.
void Console::RelayWrite(Source& s, absl::string_view data) {
  if (s.has_file && congested()) {  // the log file has the bytes: the console drops them
    dropped_lines_ += std::max<uint64_t>(1, static_cast<uint64_t>(std::count(data.begin(), data.end(), '\n')));
    dropped_bytes_ += data.size();
    return;
  }
  const size_t nl = data.rfind('\n');
  if (nl != absl::string_view::npos) {
    s.pending.append(data.data(), nl + 1);
    RelaySend(s, s.pending);
    s.pending.clear();
    s.partial_since.reset();
    data.remove_prefix(nl + 1);
  }
  if (data.empty()) return;
  s.pending.append(data.data(), data.size());
  if (s.pending.size() >= RelayFrames::kFrameMax) {
    RelaySend(s, s.pending);
    s.pending.clear();
    s.partial_since.reset();
  } else if (!s.partial_since) {
    s.partial_since = OutClock::now();
  }
}

Console::~Console() {
  Drain();
  for (int s : {1, 2}) {
    if (own_fd_[s]) close(fds_[s]);
  }
}

int Console::AddSource(int stream, absl::string_view prefix, absl::string_view cont_prefix,
                       int colour_index, bool has_file, size_t max_line) {
  Source s;
  s.stream = stream == 2 ? 2 : 1;
  const bool c = colour_ && colour_index >= 0;
  s.prefix = c ? Coloured(prefix, colour_index) : std::string(prefix);
  s.cont_prefix = c ? Coloured(cont_prefix, colour_index) : std::string(cont_prefix);
  s.colour_index = colour_index;
  s.has_file = has_file;
  s.max_line = max_line;
  const int id = next_id_++;
  sources_.emplace(id, std::move(s));
  return id;
}

void Console::SetContinuation(int id, absl::string_view cont_prefix) {
  auto it = sources_.find(id);
  if (it != sources_.end()) it->second.cont_prefix = std::string(cont_prefix);
}

void Console::SetPartialDelay(int id, std::chrono::milliseconds delay) {
  auto it = sources_.find(id);
  if (it != sources_.end()) it->second.partial_delay = delay;
}

void Console::RemoveSource(int id) {
  auto it = sources_.find(id);
  if (it == sources_.end()) return;
  Source& s = it->second;
  if (relay_host_) {
    // The launcher's console ends the line this source left open.
    if (!s.pending.empty() || !s.need_prefix) RelaySend(s, absl::StrCat(s.pending, "\n"));
    sources_.erase(it);
    return;
  }
  if (!s.pending.empty() || s.live) {
    std::string last = std::move(s.pending);
    s.pending.clear();
    s.partial_since.reset();
    Emit(id, s, last, true);  // may wait behind another worker's line
  } else if (open_owner_ == id) {
    Buf(s.stream).push_back('\n');
    open_owner_ = -1;
    if (!held_.empty()) ReleaseHeld(false);
  }
  s.closing = true;
  ForgetClosed();
}

void Console::ForgetClosed() {
  for (auto it = sources_.begin(); it != sources_.end();) {
    const int id = it->first;
    const bool waiting = std::any_of(held_.begin(), held_.end(), [&](const Held& h) { return h.id == id; });
    if (it->second.closing && open_owner_ != id && !waiting) {
      it = sources_.erase(it);
    } else {
      ++it;
    }
  }
}

void Console::BreakOpenLine() {
  auto it = sources_.find(open_owner_);
  open_owner_ = -1;
  if (it == sources_.end()) return;
  Source& o = it->second;
  if (o.bar && OnTerminal(o.stream)) {
    MoveToRegion(it->first, o);  // a progress bar is not cut: it gets a row of its own
    return;
  }
  Buf(o.stream).push_back('\n');
  o.need_prefix = true;
  o.shown = 0;
  o.continued = true;
  o.bar = false;
}

void Console::MoveToRegion(int id, Source& s) {
  // The cursor is at the end of this open line (the region is not on screen
  // while a line is open): clear it; the region is drawn from here.
  Buf(s.stream).append("\r\033[K");
  if (open_owner_ == id) open_owner_ = -1;
  s.live = true;
  s.cr_pending = s.need_prefix;  // the line ended with '\r': the next byte redraws
  region_.push_back(id);
}

std::string Console::FitRow(const Source& s, absl::string_view text) const {
  const bool redraw = !text.empty() && text.back() == '\r';
  if (redraw) text.remove_suffix(1);
  size_t cols = WindowSize(fds_[term_queue_]).first - 1;  // the last column would wrap
  std::string on_screen;  // only its width counts: the columns left after it
  AppendColumns(s.prefix, &cols, &on_screen);  // as wide as the continuation prefix
  AppendColumns(s.row, &cols, &on_screen);
  std::string out;
  if (AppendColumns(text, &cols, &out) && out.size() < text.size()) out.append("\033[0m");
  if (redraw) out.push_back('\r');
  return out;
}

std::string Console::RowText(const Source& s) const {
  size_t cols = WindowSize(fds_[term_queue_]).first - 1;  // the last column would wrap
  std::string out;
  bool escapes = AppendColumns(s.prefix, &cols, &out);
  escapes |= AppendColumns(s.row, &cols, &out);
  if (escapes) out.append("\033[0m");
  return out;
}

void Console::HideRegion() {
  if (rows_shown_ == 0) return;
  // Each row cleared on its own (ESC[K), not the screen's rest (ESC[J): tmux
  // takes a clear from the top row for a whole-screen clear and scrolls the
  // rows into its history. The cursor ends at the region's first row.
  std::string& b = queue_[term_queue_];
  absl::StrAppend(&b, "\r\033[", rows_shown_, "A");
  for (size_t i = 0; i < rows_shown_; ++i) b.append("\033[K\033[B");
  absl::StrAppend(&b, "\033[", rows_shown_, "A");
  rows_shown_ = 0;
}

size_t Console::RegionRows() const {
  // Never more rows than the screen holds (with room for the line above).
  const size_t max_rows = std::max<size_t>(1, WindowSize(fds_[term_queue_]).second - 2);
  return std::min(region_.size(), max_rows);
}

void Console::ShowRegion() {
  if (rows_shown_ > 0 || region_.empty() || open_owner_ >= 0) return;
  std::string& b = queue_[term_queue_];
  const size_t rows = RegionRows();
  for (size_t i = 0; i < rows; ++i) {
    absl::StrAppend(&b, RowText(sources_.at(region_[i])), "\033[K\n");
  }
  rows_shown_ = rows;
}

void Console::UpdateRow(int id) {
  if (open_owner_ >= 0) return;  // drawn when the open line ends
  if (rows_shown_ != RegionRows()) {  // rows came or went: draw them all
    HideRegion();
    ShowRegion();
    return;
  }
  const size_t i = static_cast<size_t>(std::find(region_.begin(), region_.end(), id) - region_.begin());
  if (i >= rows_shown_) return;  // below the screen's last row
  // Up to the row, redraw it, back down to the line under the region.
  const size_t up = rows_shown_ - i;
  absl::StrAppend(&queue_[term_queue_], "\033[", up, "A\r", RowText(sources_.at(id)), "\033[K\033[",
                  up, "B\r");
}

void Console::EmitLive(int id, Source& s, absl::string_view text, bool end) {
  // Each '\r' starts the row anew with the bytes after it.
  for (;;) {
    const size_t cr = text.find('\r');
    const absl::string_view seg = text.substr(0, cr);
    if (!seg.empty()) {
      if (s.cr_pending) s.row.clear();
      s.cr_pending = false;
      s.row.append(seg.data(), seg.size());
    }
    if (cr == absl::string_view::npos) break;
    s.cr_pending = true;
    text.remove_prefix(cr + 1);
  }
  if (!end) {
    UpdateRow(id);
    return;
  }
  // The line ends: it leaves the region, whole, above what remains of it.
  HideRegionFor(s.stream);
  region_.erase(std::remove(region_.begin(), region_.end(), id), region_.end());
  absl::StrAppend(&Buf(s.stream), RowText(s), "\n");  // cut as its rows were: one row
  s.live = s.bar = s.cr_pending = false;
  s.row.clear();
  s.need_prefix = true;
  s.shown = 0;
  s.continued = false;
}

void Console::InputEchoed() {
  // Typed input moved the cursor below the region: leave those rows as they
  // are and draw the region anew under the input.
  rows_shown_ = 0;
  auto it = sources_.find(open_owner_);
  open_owner_ = -1;
  if (it != sources_.end()) {
    it->second.need_prefix = true;
    it->second.shown = 0;
    it->second.continued = false;
  }
  if (!held_.empty()) ReleaseHeld(false);
}

void Console::EmitRaw(int id, Source& s, absl::string_view text, bool end) {
  if (!s.dropping && open_owner_ != id) {
    if (open_owner_ >= 0) BreakOpenLine();
    // A new console line: drop it whole while the console is behind and a
    // log file has the bytes.
    if (s.has_file && congested()) {
      s.dropping = true;
      ++dropped_lines_;
    }
  }
  if (s.dropping) {
    dropped_bytes_ += text.size();
    if (end) {
      s.dropping = false;
      s.continued = false;
    }
    return;
  }
  HideRegionFor(s.stream);
  std::string& b = Buf(s.stream);
  if (s.need_prefix) {
    b.append(s.continued ? s.cont_prefix : s.prefix);
    s.need_prefix = false;
    s.shown = 0;
    s.row.clear();
  }
  if (s.bar && OnTerminal(s.stream)) {
    b.append(FitRow(s, text));  // a redraw goes back to the row's start only if it never wrapped
  } else {
    b.append(text.data(), text.size());
  }
  s.shown += text.size();
  if (OnTerminal(s.stream)) {
    absl::string_view shown = text;
    if (!shown.empty() && shown.back() == '\r') shown.remove_suffix(1);
    s.row.append(shown.data(), shown.size());
  }
  if (end) {
    b.push_back('\n');
    s.need_prefix = true;
    s.shown = 0;
    s.continued = false;
    s.bar = false;
    s.row.clear();
    open_owner_ = -1;
  } else {
    open_owner_ = id;
  }
}

void Console::EmitPiece(int id, Source& s, absl::string_view text, bool end) {
  while (s.shown + text.size() > s.max_line) {
    const size_t take = s.max_line - std::min(s.shown, s.max_line);
    EmitRaw(id, s, text.substr(0, take), true);
    s.continued = true;
    text.remove_prefix(take);
  }
  EmitRaw(id, s, text, end);
}

void Console::Emit(int id, Source& s, absl::string_view text, bool end) {
  if (open_owner_ >= 0 && open_owner_ != id) {
    auto o = sources_.find(open_owner_);
    if (o != sources_.end() && o->second.bar && OnTerminal(o->second.stream)) {
      BreakOpenLine();  // a progress bar on a terminal moves to the region: no wait
    }
  }
  if (open_owner_ >= 0 && open_owner_ != id) {
    // Another worker's line is unfinished on screen: wait (up to kHoldLimit)
    // for it to end rather than cut it.
    if (held_.empty()) hold_since_ = OutClock::now();
    held_.push_back({id, std::string(text), end});
    held_bytes_ += text.size();
    if (held_bytes_ > (1 << 20)) ReleaseHeld(/*force=*/true);
    return;
  }
  EmitNow(id, s, text, end);
  if (open_owner_ < 0 && !held_.empty()) ReleaseHeld(false);
}

void Console::ReleaseHeld(bool force) {
  if (force && open_owner_ >= 0) BreakOpenLine();
  std::vector<Held> held = std::move(held_);
  held_.clear();
  held_bytes_ = 0;
  for (Held& h : held) {
    auto it = sources_.find(h.id);
    if (it != sources_.end()) Emit(h.id, it->second, h.text, h.end);
  }
  ForgetClosed();
}

void Console::EmitNow(int id, Source& s, absl::string_view text, bool end) {
  if (s.live) {
    EmitLive(id, s, text, end);
    return;
  }
  // At the start of a console line a '\r' redraws nothing: skip it. A
  // redraw starts the line anew, under the source's own prefix even after a
  // cut (a stream prefixed upstream brings that prefix again itself).
  // A line that starts with '\r' is a progress bar's first drawing (tqdm's way).
  const bool leading_cr = s.need_prefix && !text.empty() && text.front() == '\r';
  while (s.need_prefix && !text.empty() && text.front() == '\r') {
    text.remove_prefix(1);
    s.continued = false;
  }
  // A line with a redraw is a bar from its first drawing on (on a terminal,
  // cut to the width: EmitRaw).
  // A '\r' that ends a whole line ("\r\n") redraws nothing.
  const size_t first_cr = text.find('\r');
  if (!end && (leading_cr || first_cr != absl::string_view::npos)) s.bar = true;
  if (end && first_cr != absl::string_view::npos && first_cr + 1 < text.size()) s.bar = true;
  for (size_t cr; (cr = text.find('\r')) != absl::string_view::npos && cr + 1 < text.size();) {
    // A redraw: the bytes after '\r' start again at the left, so does the prefix.
    EmitPiece(id, s, text.substr(0, cr + 1), false);
    s.need_prefix = true;
    s.continued = false;
    s.shown = 0;
    s.bar = true;
    text.remove_prefix(cr + 1);
    while (text.size() > 1 && text.front() == '\r') text.remove_prefix(1);
  }
  if (text.empty() && !end) return;
  EmitPiece(id, s, text, end);
  if (!end && leading_cr) s.bar = true;
  if (!end && text.back() == '\r') {
    s.need_prefix = true;
    s.continued = false;
    s.shown = 0;
    s.bar = true;
  }
  if (!end && s.bar && open_owner_ == id && !region_.empty() && OnTerminal(s.stream)) {
    BreakOpenLine();  // bars are being drawn in the region already: join them
    UpdateRow(id);
  }
}

size_t Console::AppendWholeLines(Source& s, absl::string_view data) {
  // Nothing is open on screen and nothing waits: each whole line goes to the
  // queue as prefix + the line with its own '\n'. Lines are copied into room
  // made once per batch (no per-line append with its checks). Stops at
  // anything else (an overlong line, congestion that drops lines, a partial
  // line at the end) and returns what it took.
  std::string& b = Buf(s.stream);
  const size_t plen = s.prefix.size();
  constexpr size_t kBatchLines = 1024;
  // A batch holds at least one whole line of up to max_line bytes.
  const size_t batch_bytes = std::max<size_t>(128 * 1024, s.max_line + 1);
  const char* p = data.data();
  const char* const end = p + data.size();
  while (p < end && !(s.has_file && congested())) {
    const char* const batch_end = p + std::min(batch_bytes, static_cast<size_t>(end - p));
    const size_t old = b.size();
    b.resize(old + static_cast<size_t>(batch_end - p) + kBatchLines * plen);
    char* out = &b[old];
    const char* const first = p;
    for (size_t lines = 0; lines < kBatchLines && p < batch_end; ++lines) {
      const char* nl = static_cast<const char*>(memchr(p, '\n', static_cast<size_t>(batch_end - p)));
      if (nl == nullptr || static_cast<size_t>(nl - p) > s.max_line) break;
      const size_t len = static_cast<size_t>(nl + 1 - p);
      memcpy(out, s.prefix.data(), plen);
      memcpy(out + plen, p, len);
      out += plen + len;
      p = nl + 1;
    }
    b.resize(static_cast<size_t>(out - b.data()));
    if (p == first) break;  // no whole line here: the caller takes over
  }
  return static_cast<size_t>(p - data.data());
}

void Console::Write(int id, absl::string_view data) {
  auto it = sources_.find(id);
  if (it == sources_.end()) return;
  Source& s = it->second;
  if (discard_[s.stream]) return;
  if (relay_host_) return RelayWrite(s, data);
  const bool has_cr = memchr(data.data(), '\r', data.size()) != nullptr;
  std::string& b = Buf(s.stream);
  while (!data.empty()) {
    if (!has_cr && s.pending.empty() && open_owner_ < 0 && held_.empty() && s.need_prefix &&
        !s.continued && !s.dropping && !s.live) {
      HideRegionFor(s.stream);
      data.remove_prefix(AppendWholeLines(s, data));  // the common case
      if (data.empty()) break;
    }
    const char* nl = static_cast<const char*>(memchr(data.data(), '\n', data.size()));
    if (nl == nullptr) {
      s.pending.append(data.data(), data.size());
      if (s.shown + s.pending.size() >= s.max_line) {
        Emit(id, s, s.pending, false);  // overlong: show it now, in pieces
        s.pending.clear();
        s.partial_since.reset();
      } else if (!s.partial_since) {
        s.partial_since = OutClock::now();
      }
      break;
    }
    const size_t len = static_cast<size_t>(nl - data.data());
    if (s.pending.empty()) {
      Emit(id, s, data.substr(0, len), true);
    } else {
      s.pending.append(data.data(), len);
      Emit(id, s, s.pending, true);
      s.pending.clear();
      s.partial_since.reset();
    }
    data.remove_prefix(len + 1);
  }
  if (b.size() - queue_off_[Queue(s.stream)] > (1 << 20)) Flush();
}

void Console::Text(absl::string_view text) {
  if (open_owner_ >= 0) BreakOpenLine();
  if (!held_.empty()) ReleaseHeld(true);
  if (open_owner_ >= 0) BreakOpenLine();
  HideRegionFor(2);
  Buf(2).append(text.data(), text.size());
}

void Console::Line(int stream, absl::string_view prefix, absl::string_view line, int colour_index) {
  if (open_owner_ >= 0) BreakOpenLine();
  if (!held_.empty()) ReleaseHeld(true);
  if (open_owner_ >= 0) BreakOpenLine();
  HideRegionFor(stream);
  std::string& b = Buf(stream);
  if (colour_ && colour_index >= 0) {
    absl::StrAppend(&b, Coloured(prefix, colour_index), line, "\n");
  } else {
    absl::StrAppend(&b, prefix, line, "\n");
  }
  if (b.size() - queue_off_[Queue(stream)] > (1 << 16)) Flush();
}

void Console::ShowPartials(OutClock::time_point now) {
  if (!held_.empty() && now - hold_since_ >= kHoldLimit) ReleaseHeld(/*force=*/true);
  for (auto& [id, s] : sources_) {
    if (!s.partial_since || now - *s.partial_since < s.partial_delay) continue;
    s.partial_since.reset();
    if (s.pending.empty()) continue;
    std::string text = std::move(s.pending);
    s.pending.clear();
    if (relay_host_) {
      RelaySend(s, text);
    } else {
      Emit(id, s, text, false);
    }
  }
}

std::optional<OutClock::time_point> Console::NextDeadline() const {
  std::optional<OutClock::time_point> next;
  if (!held_.empty()) next = hold_since_ + kHoldLimit;
  for (const auto& [id, s] : sources_) {
    if (s.partial_since && (!next || *s.partial_since + s.partial_delay < *next)) {
      next = *s.partial_since + s.partial_delay;
    }
  }
  return next;
}

bool Console::congested() const {
  return queue_[1].size() - queue_off_[1] + queue_[2].size() - queue_off_[2] > kQueueLimit;
}

std::vector<int> Console::BlockedFds() const {
  std::vector<int> out;
  for (int s : {1, 2}) {
    if (queue_[s].size() > queue_off_[s]) out.push_back(fds_[s]);
  }
  return out;
}

void Console::MaybeReportDrops() {
  if (dropped_lines_ == 0 || congested()) return;
  if (queue_[1].size() - queue_off_[1] + queue_[2].size() - queue_off_[2] > kQueueLimit / 4) return;
  Text(absl::StrCat("drun: the console could not keep up: ", Count(dropped_lines_, "line"), " (",
                    Count(dropped_bytes_, "byte"), ") not shown here; the log files have them\n"));
  dropped_lines_ = 0;
  dropped_bytes_ = 0;
}

void Console::Flush() {
  MaybeReportDrops();
  if (term_queue_ != 0) ShowRegion();  // whole lines went above it: the region comes back
  for (int s : {1, 2}) {
    std::string& q = queue_[s];
    size_t& off = queue_off_[s];
    FrameQueue(s);
    while (off < q.size()) {
      ssize_t n = write(fds_[s], q.data() + off, q.size() - off);
      if (n > 0) {
        off += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && errno == EAGAIN) {
        break;
      } else {
        off = q.size();  // EPIPE or a closed console: output is lost, the job goes on
      }
    }
    if (off == q.size()) {
      q.clear();
      off = 0;
      framed_[s] = 0;
    } else if (off > (4 << 20)) {
      q.erase(0, off);
      framed_[s] -= off;
      off = 0;
    }
  }
}

void Console::Drain() {
  if (!held_.empty()) ReleaseHeld(/*force=*/true);
  for (;;) {
    Flush();
    std::vector<int> blocked = BlockedFds();
    if (blocked.empty()) return;
    pollfd p{blocked[0], POLLOUT, 0};
    poll(&p, 1, -1);
  }
}


namespace {

bool IdentifierChar(char c, bool first) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return first ? alpha : alpha || (c >= '0' && c <= '9');
}

// The value of a template's identifier; nullopt for one it does not know.
std::optional<std::string> PrefixField(absl::string_view name, const PrefixFields& f) {
  if (name == "role_name") return f.role;
  if (name == "local_rank") return std::to_string(f.local_rank);
  if (name == "rank") return std::to_string(f.rank);
  if (name == "hostname") return f.hostname;
  return std::nullopt;
}

}  // namespace

std::string ExpandPrefixTemplate(absl::string_view tmpl, const PrefixFields& f) {
  std::string out;
  size_t i = 0;
  while (i < tmpl.size()) {
    if (tmpl[i] != '$' || i + 1 >= tmpl.size()) {
      out += tmpl[i++];
      continue;
    }
    if (tmpl[i + 1] == '$') {  // $$ is a '$'
      out += '$';
      i += 2;
      continue;
    }
    const bool braced = tmpl[i + 1] == '{';
    size_t start = i + (braced ? 2 : 1), end = start;
    while (end < tmpl.size() && IdentifierChar(tmpl[end], end == start)) ++end;
    const bool closed = !braced || (end < tmpl.size() && tmpl[end] == '}');
    std::optional<std::string> value;
    if (end > start && closed) value = PrefixField(tmpl.substr(start, end - start), f);
    if (!value) {  // not a placeholder it knows: kept as written
      out += tmpl[i++];
      continue;
    }
    out += *value;
    i = end + (braced ? 1 : 0);
  }
  return out;
}

LinePrefixes WorkerPrefixes(absl::string_view tmpl, const PrefixFields& f, bool host_in_prefix) {
  if (tmpl.empty()) {
    const std::string tag = host_in_prefix ? absl::StrCat("[", f.hostname, ":rank", f.rank, "]")
                                           : absl::StrCat("[rank", f.rank, "]");
    return {tag + ": ", tag + "+ "};
  }
  LinePrefixes p;
  p.line = ExpandPrefixTemplate(tmpl, f);
  p.cont = p.line;
  const size_t colon = p.cont.find_last_not_of(' ');
  if (colon != std::string::npos && p.cont[colon] == ':') {
    p.cont[colon] = '+';
  } else {
    p.cont += "+ ";
  }
  return p;
}

}  // namespace drun
