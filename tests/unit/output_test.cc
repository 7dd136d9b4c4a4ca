#include "agent/output.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <functional>

namespace drun {
namespace {

std::vector<std::string> Split(LineSplitter& s, const std::vector<std::string>& chunks, bool flush) {
  std::vector<std::string> lines;
  auto on = [&](absl::string_view l) { lines.emplace_back(l); };
  for (const auto& c : chunks) s.Feed(c, on);
  if (flush) s.Flush(on);
  return lines;
}

TEST(LineSplitterTest, WholeLinesAcrossChunks) {
  LineSplitter s;
  EXPECT_EQ(Split(s, {"he", "llo\nwor", "ld\n", "\n"}, false),
            (std::vector<std::string>{"hello", "world", ""}));
  EXPECT_FALSE(s.has_pending());
}

TEST(LineSplitterTest, LastLineWithoutNewlineOnFlush) {
  LineSplitter s;
  EXPECT_EQ(Split(s, {"a\nb"}, false), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(s.has_pending());
  std::vector<std::string> rest;
  s.Flush([&](absl::string_view l) { rest.emplace_back(l); });
  EXPECT_EQ(rest, (std::vector<std::string>{"b"}));
}

TEST(LineSplitterTest, OverlongLinesAreCut) {
  LineSplitter s(4);
  EXPECT_EQ(Split(s, {"abcdefghij\n"}, false), (std::vector<std::string>{"abcd", "efgh", "ij"}));
  LineSplitter t(4);
  EXPECT_EQ(Split(t, {"ab", "cdef", "g"}, true), (std::vector<std::string>{"abcd", "efg"}));
}

TEST(TailBufferTest, KeepsLastLines) {
  TailBuffer t(2);
  t.Add("1");
  t.Add("2");
  t.Add("3");
  EXPECT_EQ(t.lines(), (std::vector<std::string>{"2", "3"}));
}

TEST(StdSpecTest, ParsesTorchrunForms) {
  const Streams none, out{true, false}, both = Streams::Both();
  auto all = ParseStdSpec("3");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->ForRank(0), both);
  EXPECT_EQ(all->ForRank(7), both);
  auto per = ParseStdSpec("0:1,2:3");
  ASSERT_TRUE(per.ok());
  EXPECT_EQ(per->ForRank(0), out);
  EXPECT_EQ(per->ForRank(1), none);
  EXPECT_EQ(per->ForRank(2), both);
  EXPECT_EQ(ParseStdSpec("")->ForRank(0), none);
  EXPECT_FALSE(ParseStdSpec("")->NamesLogFiles());
  EXPECT_TRUE(ParseStdSpec("0:0")->NamesLogFiles());
  EXPECT_EQ(ParseStdSpec("2")->ForRank(3), (Streams{false, true}));
  for (const char* bad : {"4", "x", "0:4", "a:1", "-1"}) EXPECT_FALSE(ParseStdSpec(bad).ok()) << bad;
}

// torchrun's digit, the JobSpec's form, is read and written in one place.
TEST(StdSpecTest, DigitsRoundTrip) {
  for (int d = 0; d <= 3; ++d) EXPECT_EQ(Streams::FromDigit(d)->ToDigit(), d);
  EXPECT_FALSE(Streams::FromDigit(4));
  EXPECT_FALSE(Streams::FromDigit(-1));
}

TEST(RankListTest, Parses) {
  EXPECT_EQ(*ParseRankList("0,2"), (std::vector<int>{0, 2}));
  EXPECT_TRUE(ParseRankList("")->empty());
  EXPECT_FALSE(ParseRankList("0,x").ok());
}

TEST(ConsoleTest, PrefixesEveryLineAndKeepsStreamsApart) {
  int out[2], err[2];
  ASSERT_EQ(pipe(out), 0);
  ASSERT_EQ(pipe(err), 0);
  {
    Console c(out[1], err[1]);
    EXPECT_FALSE(c.colour());  // a pipe is not a TTY
    c.Line(1, "[rank0]: ", "hello", 0);
    c.Line(2, "[rank1]: ", "oops", 1);
    c.Line(1, "[rank1]: ", "", 1);
    c.Flush();
  }
  close(out[1]);
  close(err[1]);
  char buf[256];
  ssize_t n = read(out[0], buf, sizeof buf);
  EXPECT_EQ(std::string(buf, n), "[rank0]: hello\n[rank1]: \n");
  n = read(err[0], buf, sizeof buf);
  EXPECT_EQ(std::string(buf, n), "[rank1]: oops\n");
  close(out[0]);
  close(err[0]);
}

// Runs `body` on a Console whose stdout and stderr are pipes; returns what
// each received.
std::pair<std::string, std::string> Capture(const std::function<void(Console&)>& body) {
  int out[2], err[2];
  EXPECT_EQ(pipe(out), 0);
  EXPECT_EQ(pipe(err), 0);
  {
    Console c(out[1], err[1]);
    body(c);
    c.Drain();
  }
  close(out[1]);
  close(err[1]);
  auto slurp = [](int fd) {
    std::string s;
    char buf[65536];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) s.append(buf, n);
    close(fd);
    return s;
  };
  std::string o = slurp(out[0]);
  return {o, slurp(err[0])};
}

const OutClock::time_point kLater = OutClock::now() + std::chrono::hours(1);

TEST(ConsoleTest, PartialLineShownWithPrefixThenCompleted) {
  auto [out, err] = Capture([](Console& c) {
    int a = c.AddSource(1, "[rank0]: ", "[rank0]+ ", -1, false);
    c.Write(a, "(Pdb) ");
    EXPECT_TRUE(c.NextDeadline().has_value());
    c.ShowPartials(OutClock::now());  // too early: nothing yet
    c.Flush();
    c.ShowPartials(kLater);
    c.Write(a, "p x\n42\n");
  });
  EXPECT_EQ(out, "[rank0]: (Pdb) p x\n[rank0]: 42\n");
}

TEST(ConsoleTest, AnotherSourceEndsTheOpenLineAndTheOwnerContinuesMarked) {
  auto [out, err] = Capture([](Console& c) {
    int a = c.AddSource(1, "[rank0]: ", "[rank0]+ ", -1, false);
    int b = c.AddSource(1, "[rank1]: ", "[rank1]+ ", -1, false);
    c.Write(a, "half");
    c.ShowPartials(kLater);
    c.Write(b, "whole\n");
    c.Flush();
    // rank1 waits for rank0's line, which does not end in time: it is cut.
    c.ShowPartials(kLater + Console::kHoldLimit);
    c.Write(a, " rest\n");
  });
  EXPECT_EQ(out, "[rank0]: half\n[rank1]: whole\n[rank0]+  rest\n");
}

TEST(ConsoleTest, OthersWaitBrieflyForAnUnfinishedLine) {
  auto [out, err] = Capture([](Console& c) {
    int a = c.AddSource(1, "[rank0]: ", "[rank0]+ ", -1, false);
    int b = c.AddSource(1, "[rank1]: ", "[rank1]+ ", -1, false);
    c.Write(a, "half");
    c.ShowPartials(kLater);  // shown: the writer stalled
    c.Write(b, "whole\npart");
    c.Write(a, " rest\n");  // back within kHoldLimit: its line stays whole
    c.RemoveSource(b);
  });
  EXPECT_EQ(out, "[rank0]: half rest\n[rank1]: whole\n[rank1]: part\n");
}

TEST(ConsoleTest, CarriageReturnRedrawsKeepThePrefix) {
  auto [out, err] = Capture([](Console& c) {
    int a = c.AddSource(2, "[rank0]: ", "[rank0]+ ", -1, false);
    c.Write(a, "\r 10%|#");
    c.ShowPartials(kLater);
    c.Write(a, "\r 50%|#####");
    c.ShowPartials(kLater);
    c.Write(a, "\r100%|##########\n");
    c.Write(a, "windows\r\n");
  });
  EXPECT_EQ(err, "[rank0]:  10%|#\r[rank0]:  50%|#####\r[rank0]: 100%|##########\n[rank0]: windows\r\n");
}

TEST(ConsoleTest, OverlongLineInMarkedPieces) {
  auto [out, err] = Capture([](Console& c) {
    int a = c.AddSource(1, "[r]: ", "[r]+ ", -1, false, 4);
    c.Write(a, "abcdefghij\nxy\n");
  });
  EXPECT_EQ(out, "[r]: abcd\n[r]+ efgh\n[r]+ ij\n[r]: xy\n");
}

TEST(ConsoleTest, LastLineWithoutNewlineShownWhenSourceEnds) {
  auto [out, err] = Capture([](Console& c) {
    int a = c.AddSource(1, "[rank0]: ", "[rank0]+ ", -1, false);
    c.Write(a, "bye");
    c.RemoveSource(a);
  });
  EXPECT_EQ(out, "[rank0]: bye\n");
}

TEST(ConsoleTest, DrunTextNeverLandsInsideAPartialLine) {
  auto [out, err] = Capture([](Console& c) {
    int a = c.AddSource(2, "[rank0]: ", "[rank0]+ ", -1, false);
    c.Write(a, "Password: ");
    c.ShowPartials(kLater);
    c.Text("drun: hello\n");
  });
  EXPECT_EQ(err, "[rank0]: Password: \ndrun: hello\n");
}

TEST(ConsoleTest, SlowConsoleDropsWholeLinesThatHaveALogFileAndSaysSo) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  int err[2];
  ASSERT_EQ(pipe(err), 0);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  const std::string line(1000, 'x');
  {
    Console c(p[1], err[1]);
    int logged = c.AddSource(1, "[rank0]: ", "[rank0]+ ", -1, true);
    int unlogged = c.AddSource(1, "[rank1]: ", "[rank1]+ ", -1, false);
    // Nobody reads p[0]: past the limit lines with a log file are dropped,
    // lines without one are kept (their reader is throttled instead).
    for (size_t i = 0; i * 1001 < 2 * Console::kQueueLimit; ++i) {
      c.Write(logged, line + "\n");
      c.Flush();
    }
    EXPECT_TRUE(c.congested());
    c.Write(unlogged, "kept\n");
    // The reader catches up: the drop is reported on stderr.
    std::string got;
    char buf[1 << 16];
    while (!c.BlockedFds().empty()) {
      ssize_t n = read(p[0], buf, sizeof buf);
      if (n > 0) got.append(buf, n);
      c.Flush();
    }
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0;) got.append(buf, n);
    EXPECT_NE(got.find("[rank1]: kept\n"), std::string::npos);
    // Whole lines only: every line starts with a prefix.
    size_t bad = 0;
    for (size_t pos = 0; pos < got.size();) {
      if (got.compare(pos, 9, "[rank0]: ") != 0 && got.compare(pos, 9, "[rank1]: ") != 0) ++bad;
      size_t nl = got.find('\n', pos);
      if (nl == std::string::npos) break;
      pos = nl + 1;
    }
    EXPECT_EQ(bad, 0u);
    c.Flush();
  }
  char ebuf[4096];
  ssize_t n = read(err[0], ebuf, sizeof ebuf);
  ASSERT_GT(n, 0);
  EXPECT_NE(std::string(ebuf, n).find("could not keep up"), std::string::npos);
  close(p[0]);
  close(err[0]);
  close(p[1]);
  close(err[1]);
}

TEST(StdinTargetTest, Parses) {
  EXPECT_TRUE(StdinIncludes(*ParseStdinTarget(""), 0));
  EXPECT_FALSE(StdinIncludes(*ParseStdinTarget(""), 1));
  EXPECT_TRUE(StdinIncludes(*ParseStdinTarget("3"), 3));
  EXPECT_TRUE(StdinIncludes(*ParseStdinTarget("all"), 7));
  EXPECT_FALSE(StdinIncludes(*ParseStdinTarget("none"), 0));
  EXPECT_FALSE(ParseStdinTarget("-1").ok());
  EXPECT_FALSE(ParseStdinTarget("rank0").ok());
}

TEST(RawTailTest, KeepsLastLines) {
  RawTail t(16);
  t.Add("one\ntwo\nthr");
  t.Add("ee\n");
  EXPECT_EQ(t.lines(2), (std::vector<std::string>{"two", "three"}));
  t.Add(std::string(40, 'z'));
  EXPECT_EQ(t.lines(), (std::vector<std::string>{std::string(16, 'z')}));
}


// --- On a terminal: progress bars of several sources in a live region -------

// A pseudo-terminal (80x24, or `cols` wide) whose screen the test reads back
// through a small emulator of what the console writes: \r, \n, ESC[nA,
// ESC[nB, ESC[K, ESC[J, SGR (ignored) and printable bytes, which wrap onto
// the next row past the last column as a terminal's do.
class Terminal {
 public:
  explicit Terminal(size_t cols = 80) : cols_(cols) {
    master_ = posix_openpt(O_RDWR | O_NOCTTY);
    EXPECT_GE(master_, 0);
    grantpt(master_);
    unlockpt(master_);
    winsize ws{};
    ws.ws_col = static_cast<unsigned short>(cols);
    ws.ws_row = 24;
    ioctl(master_, TIOCSWINSZ, &ws);
    slave_ = open(ptsname(master_), O_RDWR | O_NOCTTY);
    EXPECT_GE(slave_, 0);
    fcntl(master_, F_SETFL, O_NONBLOCK);
  }
  ~Terminal() {
    close(slave_);
    close(master_);
  }
  int fd() const { return slave_; }
  // What the console wrote since the last call, fed to the screen.
  std::string Read() {
    std::string got;
    char buf[65536];
    for (ssize_t n; (n = read(master_, buf, sizeof buf)) > 0;) got.append(buf, n);
    Feed(got);
    return got;
  }
  // The screen's rows, without trailing blank rows.
  std::vector<std::string> Rows() const {
    std::vector<std::string> r = rows_;
    while (!r.empty() && r.back().empty()) r.pop_back();
    return r;
  }
  size_t cursor_row() const { return row_; }

 private:
  void Feed(absl::string_view s) {
    for (size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if (c == '\r') {
        col_ = 0;
      } else if (c == '\n') {
        ++row_;
      } else if (c == '\033' && i + 1 < s.size() && s[i + 1] == '[') {
        size_t j = i + 2;
        int n = 0;
        while (j < s.size() && isdigit(static_cast<unsigned char>(s[j]))) n = n * 10 + (s[j++] - '0');
        const char op = j < s.size() ? s[j] : 'm';
        if (op == 'A') row_ -= std::min<size_t>(row_, n ? n : 1);
        if (op == 'B') row_ += n ? n : 1;
        if (op == 'K') Row().resize(std::min(Row().size(), col_));
        if (op == 'J') {
          Row().resize(std::min(Row().size(), col_));
          rows_.resize(row_ + 1);
        }
        i = j;
      } else {
        if (col_ >= cols_) {  // the last column was written: this byte starts the next row
          col_ = 0;
          ++row_;
        }
        std::string& r = Row();
        if (r.size() < col_) r.resize(col_, ' ');
        if (r.size() == col_) r.push_back(c); else r[col_] = c;
        ++col_;
      }
    }
  }
  std::string& Row() {
    if (rows_.size() <= row_) rows_.resize(row_ + 1);
    return rows_[row_];
  }
  size_t cols_;
  int master_ = -1;
  int slave_ = -1;
  std::vector<std::string> rows_;
  size_t row_ = 0, col_ = 0;
};

size_t RowsWith(const std::vector<std::string>& rows, const std::string& what) {
  return std::count_if(rows.begin(), rows.end(),
                       [&](const std::string& r) { return r.find(what) != std::string::npos; });
}

TEST(ConsoleTerminalTest, TwoBarsKeepARowEachUpdatedInPlaceWhileLinesScrollAbove) {
  Terminal t;
  Console c(t.fd(), t.fd());
  const int a = c.AddSource(1, "[rank0]: ", "[rank0]+ ", -1, false);
  const int b = c.AddSource(2, "[rank1]: ", "[rank1]+ ", -1, false);
  const int x = c.AddSource(1, "[rank2]: ", "[rank2]+ ", -1, false);
  c.Write(x, "hello\n");
  for (int i = 1; i <= 21; ++i) {
    c.Write(a, absl::StrCat("\rstep ", i, "/21"));
    c.ShowPartials(kLater);
    c.Write(b, absl::StrCat("\rstep ", i, "/21"));
    c.ShowPartials(kLater);
    if (i == 7) c.Write(x, "a whole line\n");
    c.Flush();
    t.Read();
    if (i >= 2) {  // from rank1's first redraw on, both bars have their row
      const std::vector<std::string> rows = t.Rows();
      EXPECT_EQ(RowsWith(rows, "step"), 2u) << absl::StrJoin(rows, "|");
      EXPECT_EQ(rows[rows.size() - 2], absl::StrCat("[rank0]: step ", i, "/21"));
      EXPECT_EQ(rows.back(), absl::StrCat("[rank1]: step ", i, "/21"));
      EXPECT_EQ(t.cursor_row(), rows.size());  // below the region
    }
  }
  c.Write(b, " done\n");  // rank1's line ends: whole, above rank0's row
  c.Flush();
  t.Read();
  c.Write(a, "\n");
  c.RemoveSource(a);
  c.RemoveSource(b);
  c.RemoveSource(x);
  c.Drain();
  t.Read();
  EXPECT_EQ(t.Rows(), (std::vector<std::string>{"[rank2]: hello", "[rank2]: a whole line",
                                                "[rank1]: step 21/21 done", "[rank0]: step 21/21"}));
}

TEST(ConsoleTerminalTest, TwoBarsThatStopBothStayOnScreen) {
  Terminal t;
  Console c(t.fd(), t.fd());
  const int a = c.AddSource(1, "[rank0]: ", "[rank0]+ ", -1, false);
  const int b = c.AddSource(1, "[rank1]: ", "[rank1]+ ", -1, false);
  c.Write(a, "\rstep 1\rstep 2");
  c.Write(b, "\rstep 1\rstep 2");
  c.ShowPartials(kLater);  // both show at once; then neither draws again for a while
  c.Flush();
  t.Read();
  EXPECT_EQ(t.Rows(), (std::vector<std::string>{"[rank0]: step 2", "[rank1]: step 2"}));
  c.RemoveSource(a);
  c.RemoveSource(b);
  c.Drain();
  t.Read();
  EXPECT_EQ(t.Rows(), (std::vector<std::string>{"[rank0]: step 2", "[rank1]: step 2"}));
}

TEST(ConsoleTerminalTest, OneBarAloneIsAnOrdinaryOpenLine) {
  Terminal t;
  Console c(t.fd(), t.fd());
  const int a = c.AddSource(2, "[rank0]: ", "[rank0]+ ", -1, false);
  c.Write(a, "\r 10%|#");
  c.ShowPartials(kLater);
  c.Write(a, "\r 50%|#####");
  c.ShowPartials(kLater);
  c.Flush();
  EXPECT_EQ(t.Read(), "[rank0]:  10%|#\r[rank0]:  50%|#####");
  c.Write(a, "\r100%|##########\n");
  c.Drain();
  EXPECT_EQ(t.Read(), "\r[rank0]: 100%|##########\r\n");
}

TEST(ConsoleTerminalTest, APromptIsNotABarAndABarRowIsCutToTheWidth) {
  Terminal t;
  Console c(t.fd(), t.fd());
  const int a = c.AddSource(1, "[rank0]: ", "[rank0]+ ", -1, false);
  const int b = c.AddSource(1, "[rank1]: ", "[rank1]+ ", -1, false);
  c.Write(a, "\r=");
  c.ShowPartials(kLater);
  c.Write(a, "\r==");  // a redraw: rank0's line is a bar
  c.ShowPartials(kLater);
  c.Write(b, "name? ");  // rank0's bar moves to the region, the prompt takes the line
  c.ShowPartials(kLater);
  c.Write(a, "\r" + std::string(120, '#'));  // waits for the prompt's line (kHoldLimit)
  c.ShowPartials(kLater);  // shown, so it waits behind the open prompt
  c.Flush();
  t.Read();
  std::vector<std::string> rows = t.Rows();
  ASSERT_EQ(rows.size(), 1u) << absl::StrJoin(rows, "|");
  EXPECT_EQ(rows[0], "[rank1]: name? ");
  c.Write(b, "carol\n");  // the prompt's line ends: the region comes back below it, cut
  c.Flush();
  t.Read();
  rows = t.Rows();
  ASSERT_EQ(rows.size(), 2u) << absl::StrJoin(rows, "|");
  EXPECT_EQ(rows[0], "[rank1]: name? carol");
  EXPECT_EQ(rows[1], "[rank0]: " + std::string(79 - 9, '#'));  // 79 columns: no wrap
  c.RemoveSource(a);
  c.RemoveSource(b);
  c.Drain();
  t.Read();
  // Its line ends: its last drawing, cut as its row was.
  EXPECT_EQ(t.Rows(), (std::vector<std::string>{"[rank1]: name? carol", "[rank0]: " + std::string(79 - 9, '#')}));
}

// Issue 31: tqdm-like bars of three ranks, wider than a 40-column pane. Each
// drawing fits the row (cut to 39 columns), so moving a bar to the region
// leaves no stale wrapped row behind, and each finished bar is one row.
TEST(ConsoleTerminalTest, BarsWiderThanTheTerminalFitTheirRowsAndLeaveNoStaleRows) {
  Terminal t(40);
  Console c(t.fd(), t.fd());
  std::vector<int> ids;
  for (int r = 0; r < 3; ++r) {
    ids.push_back(c.AddSource(2, absl::StrCat("[rank", r, "]: "), absl::StrCat("[rank", r, "]+ "), -1, false));
  }
  auto bar = [](int pct) {
    return absl::StrCat("\repoch 1: ", absl::StrFormat("%3d", pct), "%|", std::string(pct / 10, '#'),
                        std::string(10 - pct / 10, ' '), "| ", pct, "/100 [00:01<00:00, 99.0it/s]");
  };
  for (int pct : {0, 50, 100}) {
    for (int id : ids) {
      c.Write(id, bar(pct));
      c.ShowPartials(kLater);
      c.Flush();
      t.Read();
    }
  }
  for (int id : ids) {
    c.Write(id, "\n");
    c.Flush();
    t.Read();
  }
  c.Drain();
  t.Read();
  const std::vector<std::string> rows = t.Rows();
  EXPECT_EQ(rows.size(), 3u) << absl::StrJoin(rows, "|");
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(RowsWith(rows, absl::StrCat("[rank", r, "]: epoch 1: 100%|##########|")), 1u)
        << absl::StrJoin(rows, "|");
  }
  for (const std::string& row : rows) EXPECT_LE(row.size(), 39u) << row;
  EXPECT_EQ(RowsWith(rows, "  0%"), 0u) << absl::StrJoin(rows, "|");
}

// --log-line-prefix-template: torchrun 2.x's macros, Python's Template.safe_substitute
// rules ($$, $name, unknown names kept), and the prefix written exactly as expanded.
TEST(WorkerPrefixesTest, TemplateIsExpandedAsTorchrunDoes) {
  const PrefixFields f{"trainer", 1, 5, "red01"};
  EXPECT_EQ(ExpandPrefixTemplate("[${role_name}${local_rank}]:", f), "[trainer1]:");
  EXPECT_EQ(ExpandPrefixTemplate("${hostname}:${rank}: ", f), "red01:5: ");
  EXPECT_EQ(ExpandPrefixTemplate("$rank|$$rank|${nope}|$nope|${rank|$", f), "5|$rank|${nope}|$nope|${rank|$");
  EXPECT_EQ(ExpandPrefixTemplate("$rank_x $local_rank", f), "$rank_x 1");
  LinePrefixes p = WorkerPrefixes("[${rank}]:", f, /*host_in_prefix=*/true);
  EXPECT_EQ(p.line, "[5]:");
  EXPECT_EQ(p.cont, "[5]+");
  p = WorkerPrefixes("${hostname}:${rank}: ", f, false);
  EXPECT_EQ(p.line, "red01:5: ");
  EXPECT_EQ(p.cont, "red01:5+ ");
  p = WorkerPrefixes("R${rank}>", f, false);
  EXPECT_EQ(p.cont, "R5>+ ");
}

TEST(WorkerPrefixesTest, WithoutTemplateDrunsOwn) {
  const PrefixFields f{"default", 1, 5, "red01"};
  LinePrefixes p = WorkerPrefixes("", f, false);
  EXPECT_EQ(p.line, "[rank5]: ");
  EXPECT_EQ(p.cont, "[rank5]+ ");
  p = WorkerPrefixes("", f, true);
  EXPECT_EQ(p.line, "[red01:rank5]: ");
  EXPECT_EQ(p.cont, "[red01:rank5]+ ");
}

}  // namespace
}  // namespace drun
