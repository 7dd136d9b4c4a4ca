// Output handling for workers: the console (per-source line assembly with
// rank prefixes, partial lines, `\r` redraws, a bounded non-blocking queue),
// the raw stderr tail kept for the root-cause summary, and the parsers of the
// output options (-r/-t, --local-ranks-filter, --stdin).
//
// Promises:
//  - a console line holds the bytes of one source only: when another source
//    must write while a partial line is on screen, that line is ended first
//    and its owner continues on a new line under its continuation prefix;
//  - every console line, and every `\r` redraw inside one, starts with the
//    source's prefix; while one is unfinished on screen, the others' output
//    waits up to kHoldLimit for it to end (so a writer that stalls mid-line
//    briefly keeps its line whole) before it is cut;
//  - a partial line (no newline yet) is shown within kPartialDelay (or its
//    source's own delay) of
//    arriving; a line longer than max_line is shown in max_line pieces, each
//    after the first under the continuation prefix ("[rank0]+ ");
//  - drun never blocks on a slow console while the bytes also go to a log
//    file: past kQueueLimit queued bytes such lines are dropped (counted and
//    reported once the console catches up); sources without a file are
//    throttled instead (the caller stops reading them, see congested()).
//  - on a terminal only (pipes and files get the bytes above, unchanged):
//    when another source must write while a source's unfinished line is a
//    `\r` redraw (a progress bar), that line is not cut but moves to a live
//    region at the bottom of the screen, one row per such source, each
//    updated in place (cursor movement) at its next redraw, while whole
//    lines and other partial lines are written above it; a row leaves the
//    region when its line ends, as one whole line (prefix and the last
//    redraw) above the region. A bar's row, in the region or not, and its
//    last drawing when its line ends, is cut to the terminal's width (read
//    at each drawing, so a resized terminal is followed), so a redraw never
//    leaves a wrapped row behind. A single bar with nobody else writing
//    stays an ordinary open line.
//    stdout and stderr on the same terminal share one queue (written in the
//    order they came).
#ifndef DRUN_AGENT_OUTPUT_H_
#define DRUN_AGENT_OUTPUT_H_

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rendezvous/base/say.h"  // WriteAll
#include "drun/v1/job.pb.h"

namespace drun {

using OutClock = std::chrono::steady_clock;

// Accumulates bytes of one stream and yields complete lines, without their
// '\n'. A line longer than max_line is yielded in max_line pieces, so a
// worker that never prints a newline cannot make drun buffer without bound.
// (The ssh launcher holds its remote agents' lines with it until a host joins.)
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

// The last `capacity` bytes of a stream; lines() splits them at the end.
class RawTail {
 public:
  explicit RawTail(size_t capacity = 32 * 1024) : capacity_(capacity) {}
  void Add(absl::string_view data);
  // The last `max_lines` whole or partial lines (the first may be cut).
  std::vector<std::string> lines(size_t max_lines = 20) const;

 private:
  size_t capacity_;
  std::string bytes_;
};

// Relay frames: how an agent whose stdout and stderr reach its launcher
// through a relay that holds a task's bytes until a newline (srun's I/O:
// slurmstepd line-buffers, and forwards a line shorter than 1024 bytes in one
// message, so lines of different tasks never mix) still gets its partial
// lines there at once, and says whose bytes they are. Each frame is one line
// of at most kFrameMax bytes:
//   '\x1e' kind tag '\x1f' bytes '\n'
// kind 'L'/'P': the agent's own bytes (its "drun: ..." lines), tag = its host;
// kind 'W'/'V': one worker stream's bytes, unprefixed, tag = that stream's
// prefix '\x1d' continuation prefix '\x1d' colour index (decimal, -1: none),
// so the launcher's one console keeps
// every rank of every host apart (prefixes, cut lines, `\r` bars) as an
// agent's console keeps its own ranks apart. 'L'/'W': the bytes end a line
// (the reader puts the '\n' back); 'P'/'V': they do not. The bytes hold no
// '\n'. A line that does not start with '\x1e' is no frame (srun's own
// messages; an agent's line before it read its launch).
struct RelayFrames {
  static constexpr size_t kFrameMax = 1000;
  // `data` as the agent's own frames from `host`. Stateless: the frames of
  // consecutive calls decode to the concatenation of their data.
  static std::string Encode(absl::string_view host, absl::string_view data);
  // `data` of one worker stream as frames (the same, per stream).
  static std::string EncodeSource(absl::string_view prefix, absl::string_view cont_prefix,
                                  int colour_index, absl::string_view data);
};

// Whose bytes a relayed piece holds.
struct RelayOrigin {
  enum class Kind { kNone, kAgent, kSource };
  Kind kind = Kind::kNone;    // kNone: a line that is no frame
  absl::string_view host;     // kAgent
  absl::string_view prefix;   // kSource: the stream's prefix and continuation prefix,
  absl::string_view cont_prefix;
  int colour_index = -1;      // and its colour (Console::AddSource)
};

// Reads one relayed stream back: frames become their origin's bytes, any
// other line passes whole (kNone), however the stream is split.
class RelayDecoder {
 public:
  using Sink = std::function<void(const RelayOrigin& origin, absl::string_view bytes)>;
  void Feed(absl::string_view data, const Sink& sink);
  // The stream ended: a last line without its newline passes as it is.
  void Finish(const Sink& sink);

 private:
  void Line(absl::string_view line, const Sink& sink);  // with its '\n'
  static constexpr size_t kMaxPending = 64 * 1024;  // a longer unframed line passes in pieces
  std::string pending_;
};

// Which of a worker's two streams a -r/-t value names. torchrun spells them
// as a digit, 0 (none), 1 (stdout), 2 (stderr) or 3 (both): FromDigit and
// ToDigit are the only places that read or write that encoding (the JobSpec
// carries the digit, agent/std_streams.h).
struct Streams {
  bool out = false;
  bool err = false;
  static Streams None() { return {}; }
  static Streams Both() { return {true, true}; }
  // 0..3; nullopt for anything else.
  static std::optional<Streams> FromDigit(int digit);
  int ToDigit() const { return (out ? 1 : 0) | (err ? 2 : 0); }
  bool any() const { return out || err; }
  Streams operator|(Streams o) const { return {out || o.out, err || o.err}; }
  bool operator==(Streams o) const { return out == o.out && err == o.err; }
};

// torchrun's -r/--redirects and -t/--tee values: one Streams for every local
// rank ("3"), or per local rank ("0:1,2:3"; ranks not listed get none).
struct StdSpec {
  Streams all;
  std::map<int, Streams> per_rank;
  bool has_per_rank = false;
  Streams ForRank(int local_rank) const;
  // Whether any rank's streams go to log files (a per-rank value does, even "0:0").
  bool NamesLogFiles() const { return has_per_rank || all.any(); }
};
absl::StatusOr<StdSpec> ParseStdSpec(absl::string_view value);

// "0,2,3" (or empty for all) for --local-ranks-filter.
absl::StatusOr<std::vector<int>> ParseRankList(absl::string_view value);

// --stdin RANK|all|none (empty: the default, rank 0).
absl::StatusOr<v1::JobSpec::StdinTarget> ParseStdinTarget(absl::string_view value);
// Whether global rank `rank` reads drun's standard input.
bool StdinIncludes(const v1::JobSpec::StdinTarget& target, int rank);

// A worker's console prefixes: `line` starts each of its console lines,
// `cont` a line continued on the next console line (a cut line).
struct LinePrefixes {
  std::string line;
  std::string cont;
};
// What names a worker in its prefix.
struct PrefixFields {
  std::string role;      // ROLE_NAME
  int local_rank = 0;
  int rank = 0;          // global
  std::string hostname;  // this node's name as drun calls it
};
// Without a template, drun's own: "[rank3]: " ("[host:rank3]: " when
// host_in_prefix), continued as "[rank3]+ ". With one
// (--log-line-prefix-template), torchrun 2.x's: the template with $$, and
// ${role_name}, ${local_rank}, ${rank}, ${hostname} (or $name) replaced, others
// left as written (Python's Template.safe_substitute), written before each line
// as it is (torchrun adds no space); the continuation is the same text with
// its last ':' made '+' (else a '+' added), so a cut line still shows whose it is.
LinePrefixes WorkerPrefixes(absl::string_view tmpl, const PrefixFields& f, bool host_in_prefix);
std::string ExpandPrefixTemplate(absl::string_view tmpl, const PrefixFields& f);

class Console {
 public:
  static constexpr std::chrono::milliseconds kPartialDelay{30};
  static constexpr size_t kQueueLimit = 16 << 20;
  // How long other workers' output waits for an unfinished line on screen to
  // end before that line is cut.
  static constexpr std::chrono::milliseconds kHoldLimit{100};

  // out_fd/err_fd are drun's stdout/stderr. A pipe or terminal is reopened
  // (through /proc/self/fd) as a private non-blocking description, so the
  // shell's own descriptor never turns non-blocking.
  Console(int out_fd = 1, int err_fd = 2);
  ~Console();
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;
  bool colour() const { return colour_; }
  // From now on everything this console writes goes out as relay frames
  // (AgentOptions::console_relay): drun's own lines from `host`, each
  // source's bytes as they came, unprefixed, under its prefixes (its partial
  // line after kPartialDelay, or at once past RelayFrames::kFrameMax). No
  // colour, no held or cut lines, no live region: the launcher's console
  // does all that for every host's ranks at once. Call before AddSource.
  void RelayFramed(std::string host);

  // A worker stream. stream: 1 = stdout, 2 = stderr. has_file: the bytes
  // also reach a log file, so the console may drop them when it is too slow.
  int AddSource(int stream, absl::string_view prefix, absl::string_view cont_prefix,
                int colour_index, bool has_file, size_t max_line = 64 * 1024);
  // A new continuation prefix for the source's next cut line (a stream whose
  // lines come prefixed already: the ssh launcher's hosts).
  void SetContinuation(int id, absl::string_view cont_prefix);
  // How long the source's partial lines wait before they show (kPartialDelay
  // unless set: a stream whose partial lines waited upstream already).
  void SetPartialDelay(int id, std::chrono::milliseconds delay);
  // Shows what is pending (with a newline) and forgets the source.
  void RemoveSource(int id);
  void Write(int id, absl::string_view data);
  // Drun's own text (whole lines) on stream 2, after ending any open line.
  void Text(absl::string_view text);
  // Shows partial lines that have waited kPartialDelay; returns when next.
  void ShowPartials(OutClock::time_point now);
  std::optional<OutClock::time_point> NextDeadline() const;
  // The terminal echoed typed input and its newline: the cursor is on a
  // fresh line, so the open line's owner starts the next one anew.
  void InputEchoed();

  // One whole line, prefixed, outside any source (no partial-line logic).
  void Line(int stream, absl::string_view prefix, absl::string_view line, int colour_index = -1);
  // Writes what the console takes without blocking.
  void Flush();
  // Blocks until everything queued is written (at exit).
  void Drain();
  // Descriptors with queued bytes, for poll(POLLOUT).
  std::vector<int> BlockedFds() const;
  // Queued bytes are past the limit: stop reading console-only sources.
  bool congested() const;
  bool discards(int stream) const { return discard_[stream == 2 ? 2 : 1]; }

 private:
  struct Source {
    int stream = 1;
    std::string prefix, cont_prefix;  // with colour codes when colour_
    int colour_index = -1;
    bool has_file = false;
    size_t max_line = 64 * 1024;
    std::string pending;       // bytes of an unfinished line not yet shown
    size_t shown = 0;          // bytes on screen since the last prefix
    bool need_prefix = true;   // the cursor is at the left: the next byte needs the prefix
    bool continued = false;    // the next console line continues a line
    std::optional<OutClock::time_point> partial_since;
    std::chrono::milliseconds partial_delay = kPartialDelay;
    bool dropping = false;     // the current line is being dropped
    bool closing = false;      // removed; forgotten once nothing of it waits
    // Terminal only: the unfinished line had a `\r` redraw; `row` is what
    // shows after its last one; `live`: the row is in the live region, where
    // `cr_pending` says the next byte starts it anew.
    bool bar = false;
    bool live = false;
    bool cr_pending = false;
    std::string row;
  };
  // Queues the whole lines at the start of `data` on the fast path; returns
  // how many bytes it took.
  size_t AppendWholeLines(Source& s, absl::string_view data);
  void Emit(int id, Source& s, absl::string_view text, bool end_of_line);
  void EmitPiece(int id, Source& s, absl::string_view text, bool end_of_line);
  void EmitRaw(int id, Source& s, absl::string_view text, bool end_of_line);
  void EmitNow(int id, Source& s, absl::string_view text, bool end_of_line);
  // Emits what waited for an open line; force: cut that line first.
  void ReleaseHeld(bool force);
  void ForgetClosed();
  void BreakOpenLine();
  int Queue(int stream) const { return queue_of_[stream == 2 ? 2 : 1]; }
  std::string& Buf(int stream) { return queue_[Queue(stream)]; }
  void MaybeReportDrops();
  // The live region (terminal only; term_queue_ is its queue, 0: none).
  bool OnTerminal(int stream) const { return term_queue_ != 0 && Queue(stream) == term_queue_; }
  // The open line `id` (a bar) leaves the screen's current line for the region.
  void MoveToRegion(int id, Source& s);
  void EmitLive(int id, Source& s, absl::string_view text, bool end);
  void UpdateRow(int id);
  // Erases the region from the screen (before anything else is written to
  // its terminal); ShowRegion draws it below the cursor's line start.
  void HideRegion();
  void ShowRegion();
  void HideRegionFor(int stream) {
    if (rows_shown_ > 0 && OnTerminal(stream)) HideRegion();
  }
  std::string RowText(const Source& s) const;
  // The start of `text` that fits on the source's row after what shows there
  // (a trailing '\r' kept).
  std::string FitRow(const Source& s, absl::string_view text) const;
  size_t RegionRows() const;  // the region's rows that fit on the screen

  // Frames the queue's bytes from framed_[q] on (relay only).
  void FrameQueue(int q);
  // Relay only: a source's bytes as frames (RelayFramed).
  void RelayWrite(Source& s, absl::string_view data);
  void RelaySend(Source& s, absl::string_view bytes);

  std::optional<std::string> relay_host_;  // RelayFramed
  size_t framed_[3] = {0, 0, 0};           // the queue's bytes before this are frames
  int fds_[3] = {-1, -1, -1};
  bool own_fd_[3] = {false, false, false};
  bool discard_[3] = {false, false, false};
  std::string queue_[3];
  size_t queue_off_[3] = {0, 0, 0};
  bool colour_ = false;
  std::map<int, Source> sources_;
  int next_id_ = 0;
  int open_owner_ = -1;  // source whose line is unfinished on screen
  struct Held {
    int id;
    std::string text;
    bool end;
  };
  std::vector<Held> held_;  // output of other sources waiting for that line
  size_t held_bytes_ = 0;
  OutClock::time_point hold_since_;
  uint64_t dropped_lines_ = 0;
  uint64_t dropped_bytes_ = 0;
  int queue_of_[3] = {0, 1, 2};  // stream -> queue (one when both are one terminal)
  int term_queue_ = 0;
  std::vector<int> region_;  // live sources, top to bottom
  size_t rows_shown_ = 0;    // rows of the region on screen, the cursor below them
};

}  // namespace drun

#endif  // DRUN_AGENT_OUTPUT_H_
