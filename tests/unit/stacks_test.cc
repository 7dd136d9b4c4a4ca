// drun::stacks against real processes: the system's CPython (DefaultPython) in a
// known function, two deadlocked Python threads, a busy loop read 200 times,
// a native program blocked in a known function (eu-stack, gdb), a pid that
// does not exist, and a process of another user. Every process started here
// signals readiness over a pipe from the very statement (Python) or function
// (C++) it then blocks in, so no capture can see it anywhere else; each is
// killed by its pid.
#include "agent/stacks/stacks.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/process.h"
#include "agent/stacks/cpython_layout.h"
#include "agent/stacks/python_reader.h"
#include "agent/stacks/tools.h"
#include "rendezvous/base/random.h"
#include "rendezvous/base/unique_fd.h"

// The C++ side of the native test: a forked child of this test binary runs
// this function, at global scope so every tool names it the same way.
extern "C" __attribute__((noinline)) int DrunStacksTestBlockedInHere(int ready_fd, int block_fd) {
  char c = 'r';
  // Says "ready" from inside this function, then blocks in it.
  if (write(ready_fd, &c, 1) != 1) return -1;
  ssize_t n = read(block_fd, &c, 1);
  asm volatile("" ::: "memory");  // keeps read() from being a tail call: this frame stays
  return static_cast<int>(n);
}

namespace drun::stacks {
namespace {

// `python -c code`'s first line of output; empty if it does not run.
std::string PythonSays(const std::string& python, const std::string& code) {
  FILE* p = popen((python + " -c '" + code + "' 2>/dev/null").c_str(), "r");
  if (p == nullptr) return "";
  char line[128] = {0};
  const bool got = fgets(line, sizeof line, p) != nullptr;
  pclose(p);
  std::string s = got ? line : "";
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// The interpreter the tests of the built-in reader run: /usr/bin/python3 when the reader
// knows its version (3.11 on Debian 12, 3.13 on Debian 13), else the newest
// /usr/bin/python3.X it knows; empty when there is none (sid's 3.14 and 3.15 are newer
// than the reader: those tests are skipped, saying so).
const std::string& DefaultPython() {
  static const std::string python = [] {
    std::vector<std::string> candidates = {"/usr/bin/python3"};
    for (int minor = 13; minor >= 8; --minor) {
      candidates.push_back("/usr/bin/python3." + std::to_string(minor));
    }
    for (const std::string& p : candidates) {
      uint32_t hex = 0;
      if (access(p.c_str(), X_OK) == 0 &&
          absl::SimpleAtoi(PythonSays(p, "import sys; print(sys.hexversion)"), &hex) &&
          FindCPythonLayout(hex) != nullptr) {
        return p;
      }
    }
    return std::string();
  }();
  return python;
}

// "3.11" for DefaultPython() 3.11.2.
std::string DefaultPythonMinor() {
  return PythonSays(DefaultPython(), "import sys; print(\"%d.%d\" % sys.version_info[:2])");
}

// A child process killed (by pid) and reaped when the test ends.
class Child {
 public:
  Child() = default;
  explicit Child(pid_t pid) : pid_(pid) {}
  Child(Child&& o) noexcept : pid_(std::exchange(o.pid_, -1)) {}
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

class StacksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = MakeTempDir("drun_stacks_test_");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Starts `python` on `script` (written to a file) and reads from
  // its stdout until `lines` newline-terminated lines have arrived.
  Child StartPython(const std::string& script, int lines, std::string* script_path,
                    std::vector<std::string>* said = nullptr,
                    const std::string& python = DefaultPython()) {
    *script_path = dir_ + "/script_" + std::to_string(scripts_++) + ".py";
    std::ofstream(*script_path) << script;
    UniqueFd r, w;
    EXPECT_TRUE(MakePipe(&r, &w));
    SpawnRequest req;
    req.argv = {python, *script_path};
    req.env = {"PATH=/usr/bin:/bin"};
    req.stdout_fd = w.get();
    absl::StatusOr<pid_t> pid = SpawnProcessGroup(req);
    EXPECT_TRUE(pid.ok()) << pid.status();
    if (!pid.ok()) return Child();
    w.reset();
    Child child(*pid);
    std::string got;
    char buf[256];
    while (std::count(got.begin(), got.end(), '\n') < lines) {
      ssize_t n = read(r.get(), buf, sizeof buf);
      if (n <= 0) break;  // the script died: the assertions below fail
      got.append(buf, static_cast<size_t>(n));
    }
    EXPECT_EQ(std::count(got.begin(), got.end(), '\n'), lines) << got;
    if (said != nullptr) *said = absl::StrSplit(got, '\n', absl::SkipEmpty());
    return child;
  }

  std::string dir_;
  int scripts_ = 0;
};

// The tests that read DefaultPython() with the built-in reader: skipped, saying why, where
// this machine has no interpreter the reader knows.
class DefaultPythonTest : public StacksTest {
 protected:
  void SetUp() override {
    StacksTest::SetUp();
    if (DefaultPython().empty()) {
      GTEST_SKIP() << "no CPython " << CPythonLayoutRange()
                   << " in /usr/bin (python3 or python3.X): the built-in reader knows no other";
    }
  }
};

const ThreadStack* FindThread(const ProcessStacks& s, int tid) {
  for (const ThreadStack& t : s.threads) {
    if (t.tid == tid) return &t;
  }
  return nullptr;
}

TEST_F(DefaultPythonTest, SleepingFunctionShowsFileLineAndCallers) {
  // Line 4 both says "ready" and sleeps: from the moment the test reads the
  // line, the innermost Python frame is inner_wait at line 4.
  const std::string script =
      "import os, time\n"                                         // 1
      "class Box:\n"                                              // 2
      "    def inner_wait(self):\n"                               // 3
      "        os.write(1, b'ready\\n') and time.sleep(10**6)\n"  // 4
      "def outer():\n"                                            // 5
      "    Box().inner_wait()\n"                                  // 6
      "outer()\n";                                                // 7
  std::string path;
  Child py = StartPython(script, 1, &path);
  absl::StatusOr<ProcessStacks> s = Capture(py.pid(), CaptureOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->python_method, Method::kBuiltinPython) << s->unavailable;
  EXPECT_TRUE(s->unavailable.empty()) << s->unavailable;
  EXPECT_TRUE(absl::StartsWith(s->python_version, DefaultPythonMinor() + ".")) << s->python_version;
  const ThreadStack* main = FindThread(*s, py.pid());
  ASSERT_NE(main, nullptr);
  ASSERT_EQ(main->python.size(), 3u) << FormatText(*s);
  EXPECT_EQ(main->python[0].function, "Box.inner_wait");
  EXPECT_EQ(main->python[0].file, path);
  EXPECT_EQ(main->python[0].line, 4);
  EXPECT_EQ(main->python[1].function, "outer");
  EXPECT_EQ(main->python[1].line, 6);
  EXPECT_EQ(main->python[2].function, "<module>");
  EXPECT_EQ(main->python[2].line, 7);
  EXPECT_FALSE(main->python_truncated);
  const std::string text = FormatText(*s);
  EXPECT_NE(text.find(absl::StrCat("  File \"", path, "\", line 4, in Box.inner_wait\n")),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(absl::StrCat("Thread ", py.pid(), " \"python3\"")), std::string::npos)
      << text;
}

// The first of `names` found in /usr/bin or one of pyenv's versions, or "".
std::string FindCPython(const std::vector<const char*>& names) {
  std::vector<std::string> roots = {"/usr/bin"};
  if (const char* home = getenv("HOME")) {
    std::error_code ec;
    const std::string versions = std::string(home) + "/.pyenv/versions";
    for (const auto& v : std::filesystem::directory_iterator(versions, ec)) {
      roots.push_back(v.path().string() + "/bin");
    }
  }
  for (const std::string& dir : roots) {
    for (const char* name : names) {
      std::string path = dir + "/" + name;
      if (access(path.c_str(), X_OK) == 0) return path;
    }
  }
  return "";
}

// An interpreter older than the built-in reader knows (pyenv's 3.7): one
// line says so and what would help, and native frames (eu-stack, gdb) stand in.
TEST_F(StacksTest, OtherCPythonVersionSaysSoAndGivesNativeFrames) {
  const std::string python = FindCPython({"python3.7"});
  if (python.empty()) GTEST_SKIP() << "no CPython 3.7 (pyenv) on this machine";
  if (!FindTool("py-spy").empty()) GTEST_SKIP() << "py-spy would read it";
  std::string path = dir_ + "/other.py";
  std::ofstream(path) << "import os, time\nos.write(1, b'ready\\n') and time.sleep(10**6)\n";
  UniqueFd r, w;
  ASSERT_TRUE(MakePipe(&r, &w));
  SpawnRequest req{{python, path}, {"PATH=/usr/bin:/bin"}, "", -1, w.get(), -1};
  absl::StatusOr<pid_t> pid = SpawnProcessGroup(req);
  ASSERT_TRUE(pid.ok()) << pid.status();
  Child child(*pid);
  w.reset();
  char c;
  ASSERT_EQ(read(r.get(), &c, 1), 1);
  absl::StatusOr<ProcessStacks> s = Capture(*pid, CaptureOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->python_method, Method::kNone);
  EXPECT_NE(s->unavailable.find("CPython 3.7 not readable by drun (it reads CPython 3.8-3.15)"),
            std::string::npos)
      << s->unavailable;
  EXPECT_NE(s->unavailable.find("install py-spy"), std::string::npos) << s->unavailable;
  EXPECT_EQ(s->unavailable.find('\n'), std::string::npos);
  EXPECT_NE(s->native_method, Method::kNone) << s->unavailable;
  const ThreadStack* main = FindThread(*s, *pid);
  ASSERT_NE(main, nullptr);
  EXPECT_FALSE(main->native.empty()) << FormatText(*s);
}

// A version number the reader has no layout for (3.16 without a
// _Py_DebugOffsets table, doctored: Py_Version points at a number in this
// test's own memory, read by the real reader through process_vm_readv like
// any target's) gets one line naming it.
TEST(PythonReaderTest, UnknownVersionGetsOneLineReason) {
  static const uint32_t kDoctored[8] = {0x031000F0};  // 3.16.0 final, then no cookie
  PythonTarget t;
  t.binary = "/doctored/libpython3.16.so";
  t.runtime = reinterpret_cast<uint64_t>(&kDoctored[2]);  // no "xdebugpy" there
  t.version = reinterpret_cast<uint64_t>(&kDoctored[0]);
  absl::StatusOr<PythonStacks> read = ReadPythonStacks(getpid(), t);
  EXPECT_TRUE(absl::IsFailedPrecondition(read.status())) << read.status();
  EXPECT_EQ(read.status().message(),
            "CPython 3.16.0 not readable by drun (it reads CPython 3.8-3.15)");
  // No Py_Version (before 3.11): the binary's name says the version.
  t.version = 0;
  t.name_version = "3.7";
  EXPECT_EQ(ReadPythonStacks(getpid(), t).status().message(),
            "CPython 3.7 not readable by drun (it reads CPython 3.8-3.15)");
  t.name_version = "";
  EXPECT_EQ(ReadPythonStacks(getpid(), t).status().message(),
            "CPython of unknown version (/doctored/libpython3.16.so exports no Py_Version and its "
            "name has no version) not readable by drun");
  t.name_version = "3.13";
  t.free_threaded = true;
  EXPECT_EQ(ReadPythonStacks(getpid(), t).status().message(),
            "CPython 3.13 free-threaded build not readable by drun");
}

// A _PyRuntime of this test's own memory whose _Py_DebugOffsets table is laid
// out as `layout`'s, holding its offsets, for the reader to find by its cookie.
class DoctoredRuntime {
 public:
  DoctoredRuntime(const CPythonLayout& layout, uint64_t version_hex) : mem_(8192, 0) {
    memcpy(mem_.data(), kDebugCookie, sizeof kDebugCookie);
    Put(kDebugVersionAt, version_hex);
    using F = uint32_t CPythonLayout::*;
    const std::pair<F, F> published[] = {
        {&CPythonLayout::dbg_runtime_interpreters_head, &CPythonLayout::runtime_interpreters_head},
        {&CPythonLayout::dbg_interp_next, &CPythonLayout::interp_next},
        {&CPythonLayout::dbg_interp_threads_head, &CPythonLayout::interp_threads_head},
        {&CPythonLayout::dbg_tstate_next, &CPythonLayout::tstate_next},
        {&CPythonLayout::dbg_tstate_interp, &CPythonLayout::tstate_interp},
        {&CPythonLayout::dbg_tstate_frame, &CPythonLayout::tstate_frame},
        {&CPythonLayout::dbg_tstate_thread_id, &CPythonLayout::tstate_thread_id},
        {&CPythonLayout::dbg_tstate_native_thread_id, &CPythonLayout::tstate_native_thread_id},
        {&CPythonLayout::dbg_frame_back, &CPythonLayout::frame_back},
        {&CPythonLayout::dbg_frame_code, &CPythonLayout::frame_code},
        {&CPythonLayout::dbg_frame_instr, &CPythonLayout::frame_instr},
        {&CPythonLayout::dbg_frame_owner, &CPythonLayout::frame_owner},
        {&CPythonLayout::dbg_code_filename, &CPythonLayout::code_filename},
        {&CPythonLayout::dbg_code_name, &CPythonLayout::code_name},
        {&CPythonLayout::dbg_code_qualname, &CPythonLayout::code_qualname},
        {&CPythonLayout::dbg_code_linetable, &CPythonLayout::code_linetable},
        {&CPythonLayout::dbg_code_first_lineno, &CPythonLayout::code_first_lineno},
        {&CPythonLayout::dbg_code_adaptive, &CPythonLayout::code_adaptive},
        {&CPythonLayout::dbg_ob_type, &CPythonLayout::ob_type},
        {&CPythonLayout::dbg_var_size, &CPythonLayout::var_size},
        {&CPythonLayout::dbg_bytes_data, &CPythonLayout::bytes_data},
        {&CPythonLayout::dbg_state_offset, &CPythonLayout::state_offset},
        {&CPythonLayout::dbg_unicode_length, &CPythonLayout::unicode_length},
        {&CPythonLayout::dbg_ascii_size, &CPythonLayout::ascii_size}};
    for (const auto& [at, value] : published) Put(layout.*at, layout.*value);
  }
  void Put(uint32_t at, uint64_t value) { memcpy(mem_.data() + at, &value, sizeof value); }
  uint64_t address() const { return reinterpret_cast<uint64_t>(mem_.data()); }

 private:
  std::vector<char> mem_;
};

// A CPython newer than drun knows (3.16, doctored) that publishes its offsets
// in a table laid out as 3.15's is read with them (an interpreter with no
// thread here); one whose table holds what no CPython's offsets can be is
// refused in one line saying why; a free-threaded build says so, and so does
// a debug build drun cannot read.
TEST(PythonReaderTest, NewerVersionIsReadWithItsOwnOffsetsOrRefusedInOneLine) {
  ASSERT_NE(NewestCPythonLayout().debug_offsets_size, 0u);
  DoctoredRuntime runtime(NewestCPythonLayout(), 0x031000F0);
  PythonTarget t;
  t.binary = "/doctored/python3.16";
  t.runtime = runtime.address();
  absl::StatusOr<PythonStacks> read = ReadPythonStacks(getpid(), t);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->version, "3.16.0");
  EXPECT_TRUE(read->published_offsets);
  EXPECT_TRUE(read->threads.empty());
  runtime.Put(NewestCPythonLayout().dbg_ob_type, 24);
  read = ReadPythonStacks(getpid(), t);
  EXPECT_TRUE(absl::IsFailedPrecondition(read.status())) << read.status();
  EXPECT_EQ(read.status().message(),
            "CPython 3.16.0 not readable by drun: its _Py_DebugOffsets gives ob_type = 24, so its "
            "table is not laid out as CPython 3.15's (drun reads CPython 3.8-3.15)");
  runtime.Put(NewestCPythonLayout().dbg_ob_type, uint64_t{1} << 40);
  EXPECT_EQ(ReadPythonStacks(getpid(), t).status().message(),
            "CPython 3.16.0 not readable by drun: its _Py_DebugOffsets gives ob_type = "
            "1099511627776, so its table is not laid out as CPython 3.15's (drun reads CPython "
            "3.8-3.15)");
  DoctoredRuntime free_threaded(*FindCPythonLayout(0x030E0000), 0x030E0AF0);
  free_threaded.Put(kDebugFreeThreadedAt, 1);
  t.runtime = free_threaded.address();
  EXPECT_EQ(ReadPythonStacks(getpid(), t).status().message(),
            "CPython 3.14.10 free-threaded build not readable by drun");
  // A debug build is read with its own offsets only: one whose objects start
  // elsewhere (--with-trace-refs) is refused; one without a table (before
  // 3.13) too.
  DoctoredRuntime trace_refs(*FindCPythonLayout(0x030E0000), 0x030E0AF0);
  trace_refs.Put(FindCPythonLayout(0x030E0000)->dbg_ob_type, 24);
  t.runtime = trace_refs.address();
  t.debug_build = true;
  EXPECT_EQ(ReadPythonStacks(getpid(), t).status().message(),
            "CPython 3.14.10 debug build not readable by drun: its _Py_DebugOffsets gives "
            "ob_type = 24");
  static const uint32_t kNoTable[8] = {0x030C01F0};  // 3.12.1, then no cookie
  t.runtime = reinterpret_cast<uint64_t>(&kNoTable[2]);
  t.version = reinterpret_cast<uint64_t>(&kNoTable[0]);
  EXPECT_EQ(ReadPythonStacks(getpid(), t).status().message(),
            "CPython 3.12.1 debug build not readable by drun");
}

// A CPython 3.11 built as a PIE with libpython3.11.so (pyenv's build): the
// symbols are found in the shared library and relocated by its load address.
TEST_F(StacksTest, SharedLibpythonPieInterpreterIsRead) {
  std::string python;
  const char* home = getenv("HOME");
  std::error_code ec;
  if (home != nullptr) {
    for (const auto& v :
         std::filesystem::directory_iterator(std::string(home) + "/.pyenv/versions", ec)) {
      const std::string lib = v.path().string() + "/lib/libpython3.11.so.1.0";
      if (access(lib.c_str(), R_OK) == 0) python = v.path().string() + "/bin/python3.11";
    }
  }
  if (python.empty()) GTEST_SKIP() << "no CPython 3.11 with a shared libpython on this machine";
  std::string path = dir_ + "/pie.py";
  std::ofstream(path)
      << "import os, time\ndef nap():\n    os.write(1, b'r') and time.sleep(10**6)\nnap()\n";
  UniqueFd r, w;
  ASSERT_TRUE(MakePipe(&r, &w));
  SpawnRequest req{{python, path}, {"PATH=/usr/bin:/bin"}, "", -1, w.get(), -1};
  absl::StatusOr<pid_t> pid = SpawnProcessGroup(req);
  ASSERT_TRUE(pid.ok()) << pid.status();
  Child child(*pid);
  w.reset();
  char c;
  ASSERT_EQ(read(r.get(), &c, 1), 1);
  absl::StatusOr<ProcessStacks> s = Capture(*pid, CaptureOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->python_method, Method::kBuiltinPython) << s->unavailable;
  const ThreadStack* main = FindThread(*s, *pid);
  ASSERT_NE(main, nullptr);
  ASSERT_EQ(main->python.size(), 2u) << FormatText(*s);
  EXPECT_EQ(main->python[0].function, "nap");
  EXPECT_EQ(main->python[0].line, 3);
  EXPECT_EQ(main->python[1].function, "<module>");
}

// Names in each compact str kind: ASCII, Latin-1 (1 byte), UCS-2 and UCS-4,
// and a file name that is not ASCII, all come out as UTF-8.
TEST_F(DefaultPythonTest, NonAsciiNamesAreUtf8) {
  const std::string path = dir_ + "/st\u00e4ck.py";
  std::ofstream(path) << "import os, time\n"
                         "def \U00020000():\n"
                         "    os.write(1, b'ready\\n') and time.sleep(10**6)\n"
                         "def \u7720\u308b():\n"
                         "    \U00020000()\n"
                         "def schl\u00e4ft():\n"
                         "    \u7720\u308b()\n"
                         "schl\u00e4ft()\n";
  UniqueFd r, w;
  ASSERT_TRUE(MakePipe(&r, &w));
  SpawnRequest req{{DefaultPython(), path}, {"PATH=/usr/bin:/bin"}, "", -1, w.get(), -1};
  absl::StatusOr<pid_t> pid = SpawnProcessGroup(req);
  ASSERT_TRUE(pid.ok()) << pid.status();
  Child child(*pid);
  w.reset();
  char c;
  ASSERT_EQ(read(r.get(), &c, 1), 1);
  absl::StatusOr<ProcessStacks> s = Capture(*pid, CaptureOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  const ThreadStack* main = FindThread(*s, *pid);
  ASSERT_NE(main, nullptr);
  ASSERT_EQ(main->python.size(), 4u) << FormatText(*s);
  EXPECT_EQ(main->python[0].function, "\U00020000");
  EXPECT_EQ(main->python[0].file, path);
  EXPECT_EQ(main->python[0].line, 3);
  EXPECT_EQ(main->python[1].function, "\u7720\u308b");
  EXPECT_EQ(main->python[2].function, "schl\u00e4ft");
  EXPECT_EQ(main->python[3].function, "<module>");
}

TEST_F(DefaultPythonTest, ProcessInfoStateWchanAndCpu) {
  const std::string script =
      "import os, time\n"
      "os.write(1, b'ready\\n') and time.sleep(10**6)\n";
  std::string path;
  Child py = StartPython(script, 1, &path);
  // The process is in time.sleep or about to enter it: wait (bounded) until
  // the kernel says it sleeps; there is no event for that.
  absl::StatusOr<ProcessStacks> s;
  for (int i = 0; i < 1000; ++i) {
    s = Capture(py.pid(), CaptureOptions{});
    ASSERT_TRUE(s.ok()) << s.status();
    if (s->state == 'S') break;
    usleep(5000);
  }
  EXPECT_EQ(s->state, 'S');
  ASSERT_FALSE(s->threads.empty());
  EXPECT_EQ(s->threads[0].state, 'S');
  EXPECT_EQ(s->command, "python3");
  EXPECT_GE(s->cpu_seconds, 0.0);
  EXPECT_LT(s->cpu_seconds, 10.0);
  // The kernel's "0" (not waiting / hidden) is reported as empty, anything else as is.
  std::ifstream wchan_file("/proc/" + std::to_string(py.pid()) + "/wchan");
  std::string raw;
  std::getline(wchan_file, raw);
  EXPECT_EQ(s->wchan, raw == "0" ? "" : raw);
}

TEST_F(DefaultPythonTest, DeadlockedThreadsBothShownOnTheirTids) {
  // Each thread tells its OS thread id on the statement that blocks it.
  const std::string script =
      "import os, threading\n"                                                       // 1
      "a, b = threading.Lock(), threading.Lock()\n"                                  // 2
      "both = threading.Barrier(2)\n"                                                // 3
      "def say(who):\n"                                                              // 4
      "    return f'{who} {threading.get_native_id()}\\n'.encode()\n"                // 5
      "def take_a_then_b():\n"                                                       // 6
      "    with a:\n"                                                                // 7
      "        both.wait()\n"                                                        // 8
      "        os.write(1, say('first')) and b.acquire()\n"                          // 9
      "def take_b_then_a():\n"                                                       // 10
      "    with b:\n"                                                                // 11
      "        both.wait()\n"                                                        // 12
      "        os.write(1, say('second')) and a.acquire()\n"                         // 13
      "ts = [threading.Thread(target=f) for f in (take_a_then_b, take_b_then_a)]\n"  // 14
      "for t in ts: t.start()\n"                                                     // 15
      // The main thread says so too, from the line it then blocks on (joining):
      // before it, it could still be returning from start() on line 15.
      "os.write(1, say('main')) and [t.join() for t in ts]\n";  // 16
  std::string path;
  std::vector<std::string> said;
  Child py = StartPython(script, 3, &path, &said);
  std::map<std::string, int> tid;
  for (const std::string& line : said) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    ASSERT_EQ(f.size(), 2u) << line;
    ASSERT_TRUE(absl::SimpleAtoi(f[1], &tid[f[0]])) << line;
  }
  absl::StatusOr<ProcessStacks> s = Capture(py.pid(), CaptureOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->threads.size(), 3u) << FormatText(*s);
  struct Want {
    const char* who;
    const char* function;
    int line;
  };
  for (const Want& w : {Want{"first", "take_a_then_b", 9}, Want{"second", "take_b_then_a", 13}}) {
    const ThreadStack* t = FindThread(*s, tid[w.who]);
    ASSERT_NE(t, nullptr) << w.who << "\n" << FormatText(*s);
    ASSERT_FALSE(t->python.empty()) << FormatText(*s);
    EXPECT_EQ(t->python[0].function, w.function) << FormatText(*s);
    EXPECT_EQ(t->python[0].line, w.line);
    EXPECT_EQ(t->python[0].file, path);
    EXPECT_EQ(t->python.back().function, "Thread._bootstrap");
  }
  const ThreadStack* main = FindThread(*s, py.pid());
  ASSERT_NE(main, nullptr);
  ASSERT_FALSE(main->python.empty());
  EXPECT_EQ(main->python.back().function, "<module>");
  EXPECT_EQ(main->python.back().line, 16);
}

TEST_F(DefaultPythonTest, BusyLoopReadTwoHundredTimesGivesPlausibleStacks) {
  const std::string script =
      "import os\n"                   // 1
      "def helper(i):\n"              // 2
      "    return i * 2\n"            // 3
      "def spin(n):\n"                // 4
      "    total = 0\n"               // 5
      "    for i in range(n):\n"      // 6
      "        total += helper(i)\n"  // 7
      "    return total\n"            // 8
      "os.write(1, b'ready\\n')\n"    // 9
      "while True:\n"                 // 10
      "    spin(1000)\n";             // 11
  std::string path;
  Child py = StartPython(script, 1, &path);
  const std::set<std::string> functions = {"<module>", "spin", "helper"};
  int truncated = 0;
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<ProcessStacks> s = Capture(py.pid(), CaptureOptions{});
    ASSERT_TRUE(s.ok()) << s.status();
    const ThreadStack* main = FindThread(*s, py.pid());
    ASSERT_NE(main, nullptr);
    if (main->python_truncated) ++truncated;
    ASSERT_FALSE(main->python.empty()) << FormatText(*s);
    ASSERT_LE(main->python.size(), 3u) << FormatText(*s);
    for (const Frame& f : main->python) {
      EXPECT_EQ(f.file, path) << FormatText(*s);
      EXPECT_EQ(functions.count(f.function), 1u) << FormatText(*s);
      EXPECT_GE(f.line, 1);
      EXPECT_LE(f.line, 11);
    }
    if (!main->python_truncated) {
      EXPECT_EQ(main->python.back().function, "<module>");
    }
  }
  // Torn reads are retried; a partial stack should stay the exception.
  EXPECT_LT(truncated, 20);
}

// Forks a child blocked in DrunStacksTestBlockedInHere; `release` is the pipe
// end that would unblock it.
Child StartBlockedNative(UniqueFd* release) {
  UniqueFd ready_r, ready_w, block_r;
  EXPECT_TRUE(MakePipe(&ready_r, &ready_w));
  EXPECT_TRUE(MakePipe(&block_r, release));
  pid_t pid = fork();
  if (pid == 0) _exit(DrunStacksTestBlockedInHere(ready_w.get(), block_r.get()));
  char c;
  EXPECT_EQ(read(ready_r.get(), &c, 1), 1);
  return Child(pid);
}

bool HasFunction(const ProcessStacks& s, const std::string& name) {
  for (const ThreadStack& t : s.threads) {
    for (const Frame& f : t.native) {
      if (f.function == name) return true;
    }
  }
  return false;
}

// Threads start and end all the time while the process is read: every
// capture succeeds, and Python frames land only on threads of the process.
TEST_F(DefaultPythonTest, ThreadsComingAndGoingNeverGiveStrayThreads) {
  const std::string script =
      "import os, threading\n"
      "def work(n):\n"
      "    return sum(range(n))\n"
      "def churn():\n"
      "    while True:\n"
      "        ts = [threading.Thread(target=work, args=(1000,)) for _ in range(4)]\n"
      "        for t in ts: t.start()\n"
      "        for t in ts: t.join()\n"
      "threading.Thread(target=churn, daemon=True).start()\n"
      "os.write(1, b'ready\\n')\n"
      "churn()\n";
  std::string path;
  Child py = StartPython(script, 1, &path);
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<ProcessStacks> s = Capture(py.pid(), CaptureOptions{});
    ASSERT_TRUE(s.ok()) << s.status();
    for (const ThreadStack& t : s->threads) {
      EXPECT_GT(t.tid, 0) << FormatText(*s);
      for (const Frame& f : t.python) {
        EXPECT_TRUE(f.file == path || absl::StartsWith(f.file, "/usr/lib/python" + DefaultPythonMinor() + "/"))
            << FormatText(*s);
      }
    }
    const ThreadStack* main = FindThread(*s, py.pid());
    ASSERT_NE(main, nullptr);
    ASSERT_FALSE(main->python.empty()) << FormatText(*s);
    if (!main->python_truncated) {
      EXPECT_EQ(main->python.back().function, "<module>");
    }
  }
}

TEST_F(StacksTest, NativeProgramShowsItsBlockedFunction) {
  UniqueFd release;
  Child child = StartBlockedNative(&release);
  absl::StatusOr<ProcessStacks> s = Capture(child.pid(), CaptureOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->python_method, Method::kNone);
  ASSERT_NE(s->native_method, Method::kNone) << s->unavailable;
  if (!FindTool("eu-stack").empty()) {
    EXPECT_EQ(s->native_method, Method::kEuStack);
  }
  EXPECT_TRUE(HasFunction(*s, "DrunStacksTestBlockedInHere")) << FormatText(*s);
  const ThreadStack* t = FindThread(*s, child.pid());
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->native.empty());
}

// A port on 127.0.0.1 nobody listens on right now.
int FreeLoopbackPort() {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return 0;
  }
  return ntohs(a.sin_port);
}

bool HasFunctionPrefix(const ProcessStacks& s, const std::string& prefix) {
  for (const ThreadStack& t : s.threads) {
    for (const Frame& f : t.native) {
      if (absl::StartsWith(f.function, prefix)) return true;
    }
  }
  return false;
}

// The LibTorch trainer (examples/libtorch) as rank 0 of 2, rank 1 a Python
// process that joins the gloo group and never takes part in a collective:
// rank 0 blocks in its first broadcast. Native frames name the C++ functions.
TEST_F(DefaultPythonTest, LibTorchTrainerStuckInACollectiveShowsNativeFrames) {
  const std::string trainer = DRUN_LIBTORCH_TRAIN;
  if (access(trainer.c_str(), X_OK) != 0) GTEST_SKIP() << trainer << " is not built";
  const int port = FreeLoopbackPort();
  ASSERT_GT(port, 0);
  std::vector<std::string> env = {"PATH=/usr/bin:/bin", "MASTER_ADDR=127.0.0.1",
                                  absl::StrCat("MASTER_PORT=", port), "WORLD_SIZE=2",
                                  "GLOO_SOCKET_IFNAME=lo",
                                  // Debian's torch 2.6 and 2.14 have no libuv TCPStore, which
                                  // both ranks would ask for (1.13 ignores it).
                                  "USE_LIBUV=0"};
  std::string script = dir_ + "/rank1.py";
  std::ofstream(script) << "import time, torch.distributed as dist\n"
                           "dist.init_process_group('gloo')\n"
                           "time.sleep(10**6)\n";
  UniqueFd null_out(open("/dev/null", O_WRONLY | O_CLOEXEC));
  UniqueFd r, w;
  ASSERT_TRUE(MakePipe(&r, &w));
  SpawnRequest rank0{{trainer}, env, "", -1, w.get(), null_out.get()};
  rank0.env.push_back("RANK=0");
  SpawnRequest rank1{{DefaultPython(), script}, env, "", -1, null_out.get(), null_out.get()};
  rank1.env.push_back("RANK=1");
  absl::StatusOr<pid_t> p0 = SpawnProcessGroup(rank0);
  ASSERT_TRUE(p0.ok()) << p0.status();
  Child trainer_child(*p0);
  absl::StatusOr<pid_t> p1 = SpawnProcessGroup(rank1);
  ASSERT_TRUE(p1.ok()) << p1.status();
  Child python_child(*p1);
  w.reset();
  // Rank 0 prints "process group ready" and goes on into the broadcast.
  std::string out;
  char buf[512];
  for (ssize_t n;
       out.find('\n') == std::string::npos && (n = read(r.get(), buf, sizeof buf)) > 0;) {
    out.append(buf, static_cast<size_t>(n));
  }
  ASSERT_NE(out.find("process group ready"), std::string::npos) << out;
  // From there to blocking in the collective there is no event: poll its
  // stack (bounded) until the main thread waits on the collective's Work.
  absl::StatusOr<ProcessStacks> s;
  for (int i = 0; i < 200; ++i) {
    s = Capture(*p0, CaptureOptions{});
    ASSERT_TRUE(s.ok()) << s.status();
    if (HasFunctionPrefix(*s, "c10d::Work::wait")) break;
  }
  EXPECT_TRUE(HasFunctionPrefix(*s, "c10d::Work::wait")) << FormatText(*s);
  EXPECT_TRUE(HasFunctionPrefix(*s, "(anonymous namespace)::Train")) << FormatText(*s);
  EXPECT_TRUE(HasFunctionPrefix(*s, "gloo::broadcast")) << FormatText(*s);
  EXPECT_EQ(s->python_method, Method::kNone);
}

// A process in state D: the parent of a vfork() waits uninterruptibly (but
// killably) until its child execs or exits. Its kernel stack says where.
TEST_F(StacksTest, ThreadInStateDShowsItsKernelStack) {
  if (geteuid() != 0) GTEST_SKIP() << "/proc/PID/stack is readable by root only";
  UniqueFd ready_r, ready_w, block_r, block_w;
  ASSERT_TRUE(MakePipe(&ready_r, &ready_w));
  ASSERT_TRUE(MakePipe(&block_r, &block_w));
  pid_t parent = fork();
  if (parent == 0) {
    if (vfork() == 0) {
      // The vfork child: system calls only. It tells its pid, then blocks.
      pid_t me = getpid();
      (void)!write(ready_w.get(), &me, sizeof me);
      char c;
      (void)!read(block_r.get(), &c, 1);
      _exit(0);
    }
    _exit(0);
  }
  Child parent_child(parent);
  pid_t grandchild = 0;
  ASSERT_EQ(read(ready_r.get(), &grandchild, sizeof grandchild),
            static_cast<ssize_t>(sizeof grandchild));
  Child vfork_child(grandchild);
  absl::StatusOr<ProcessStacks> s = Capture(parent, CaptureOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->state, 'D');
  ASSERT_EQ(s->threads.size(), 1u);
  EXPECT_EQ(s->threads[0].state, 'D');
  bool vfork_seen = false;
  for (const std::string& k : s->threads[0].kernel)
    vfork_seen = vfork_seen || absl::StrContains(k, "vfork");
  EXPECT_TRUE(vfork_seen) << FormatText(*s);
  EXPECT_NE(FormatText(*s).find("  kernel: "), std::string::npos);
  // No ptrace tool was left to wait for a thread that cannot stop.
  EXPECT_EQ(s->native_method, Method::kNone);
  EXPECT_NE(s->unavailable.find("state D"), std::string::npos) << s->unavailable;
}

TEST_F(StacksTest, GdbOutputParsesToTheBlockedFunction) {
  const std::string gdb = FindTool("gdb");
  if (gdb.empty()) GTEST_SKIP() << "gdb is not installed";
  UniqueFd release;
  Child child = StartBlockedNative(&release);
  absl::StatusOr<std::string> out = RunTool(
      {gdb, "-p", std::to_string(child.pid()), "-batch", "-nx", "-ex", "thread apply all bt"},
      absl::Seconds(30));
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<ToolThread> threads = ParseGdb(*out);
  ASSERT_EQ(threads.size(), 1u) << *out;
  EXPECT_EQ(threads[0].tid, child.pid());
  bool found = false;
  for (const Frame& f : threads[0].frames)
    found = found || f.function == "DrunStacksTestBlockedInHere";
  EXPECT_TRUE(found) << *out;
}

// py-spy is not packaged by Debian, so its output cannot come from a real run
// here: the text below has the shape py-spy's dump.rs (write_trace) prints on
// Linux, with an os thread id, a status and a name, and a locals section.
TEST(PySpyParseTest, ThreadsAndFrames) {
  const std::string out =
      "Process 4242: python3 train.py\n"
      "Python v3.12.1 (/usr/bin/python3.12)\n"
      "\n"
      "Thread 4242 (idle): \"MainThread\"\n"
      "    step (train.py:57)\n"
      "        Arguments:\n"
      "            x: 3\n"
      "    <module> (train.py:84)\n"
      "Thread 0x7F5A1C2B7740 (active): \"loader\"\n"
      "    run (/usr/lib/python3.12/threading.py:1010)\n";
  std::vector<ToolThread> t = ParsePySpy(out);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].tid, 4242);
  EXPECT_EQ(t[0].name, "MainThread");
  ASSERT_EQ(t[0].frames.size(), 2u);
  EXPECT_EQ(t[0].frames[0].function, "step");
  EXPECT_EQ(t[0].frames[0].file, "train.py");
  EXPECT_EQ(t[0].frames[0].line, 57);
  EXPECT_EQ(t[0].frames[1].function, "<module>");
  EXPECT_EQ(t[1].tid, 0);  // a pthread id is no OS thread id
  ASSERT_EQ(t[1].frames.size(), 1u);
  EXPECT_EQ(t[1].frames[0].file, "/usr/lib/python3.12/threading.py");
  EXPECT_EQ(t[1].frames[0].line, 1010);
}

TEST_F(StacksTest, ToolThatOverrunsIsKilled) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> out = RunTool({"/bin/sleep", "1000"}, absl::Milliseconds(200));
  EXPECT_TRUE(absl::IsDeadlineExceeded(out.status())) << out.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(StacksTest, MissingProcessIsAnError) {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  ASSERT_EQ(waitpid(pid, nullptr, 0), pid);  // reaped: the pid names nothing now
  absl::StatusOr<ProcessStacks> s = Capture(pid, CaptureOptions{});
  EXPECT_TRUE(absl::IsNotFound(s.status())) << s.status();
  EXPECT_TRUE(absl::IsInvalidArgument(Capture(0, CaptureOptions{}).status()));
}

TEST_F(StacksTest, ZombieGivesProcessInfoAndAReason) {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  Child zombie(pid);
  // Not reaped: the child stays a zombie once it has exited; wait for that
  // without reaping (WNOWAIT).
  siginfo_t info;
  ASSERT_EQ(waitid(P_PID, pid, &info, WEXITED | WNOWAIT), 0);
  absl::StatusOr<ProcessStacks> s = Capture(pid, CaptureOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->state, 'Z');
  EXPECT_NE(s->unavailable.find("zombie"), std::string::npos) << s->unavailable;
}

TEST_F(DefaultPythonTest, OtherUsersProcessGivesOneLineUnavailable) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a process of another user";
  const std::string script = "import os, time\nos.write(1, b'ready\\n') and time.sleep(10**6)\n";
  std::string path;
  Child py = StartPython(script, 1, &path);  // runs as root
  // A child that becomes `nobody` and captures the root-owned python.
  UniqueFd r, w;
  ASSERT_TRUE(MakePipe(&r, &w));
  pid_t pid = fork();
  if (pid == 0) {
    r.reset();
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    absl::StatusOr<ProcessStacks> s = Capture(py.pid(), CaptureOptions{});
    std::string report = s.ok()
                             ? absl::StrCat("ok ", s->threads.size(), " ",
                                            s->python_method == Method::kNone, "\n", s->unavailable)
                             : absl::StrCat("error ", s.status().ToString());
    (void)!write(w.get(), report.data(), report.size());
    _exit(0);
  }
  Child capturer(pid);
  w.reset();
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = read(r.get(), buf, sizeof buf)) > 0;)
    got.append(buf, static_cast<size_t>(n));
  std::vector<std::string> lines = absl::StrSplit(got, '\n');
  ASSERT_EQ(lines.size(), 2u) << got;  // the header, then exactly one line of reason
  EXPECT_EQ(lines[0], "ok 1 1") << got;
  EXPECT_TRUE(absl::StartsWith(lines[1], "ptrace not permitted: process ")) << got;
  EXPECT_NE(lines[1].find("uid 65534"), std::string::npos) << got;
}

// The 3.11 location-table decoder against CPython's own co_lines() for code
// with forward and backward line jumps, long jumps and lines without code.
TEST_F(DefaultPythonTest, LocationTableMatchesCPython) {
  const std::string script =
      "import os, sys\n"
      "def f(x):\n"
      "    y = [i for i in range(x)\n"
      "         if i % 3]\n"
      "    for k in y:\n"
      "        if k > 5:\n"
      "            break\n"
      "    else:\n"
      "        pass\n" +
      std::string(300, '\n') +
      "    return (x +\n"
      "            y[0])\n"
      "c = f.__code__\n"
      "out = [c.co_linetable.hex(), str(c.co_firstlineno)]\n"
      "for start, end, line in c.co_lines():\n"
      "    for a in range(start, end, 2):\n"
      "        out.append(f'{a}:{-1 if line is None else line}')\n"
      "os.write(1, (' '.join(out) + '\\n').encode())\n";
  std::string path;
  std::vector<std::string> said;
  Child py = StartPython(script, 1, &path, &said);
  ASSERT_EQ(said.size(), 1u);
  std::vector<std::string> f = absl::StrSplit(said[0], ' ');
  ASSERT_GT(f.size(), 10u);
  std::string table;
  for (size_t i = 0; i + 1 < f[0].size(); i += 2) {
    table.push_back(static_cast<char>(std::stoi(f[0].substr(i, 2), nullptr, 16)));
  }
  int first = std::stoi(f[1]);
  std::set<int> lines;
  for (size_t i = 2; i < f.size(); ++i) {
    std::vector<std::string> al = absl::StrSplit(f[i], ':');
    int addr = std::stoi(al[0]), line = std::stoi(al[1]);
    EXPECT_EQ(Py311AddressToLine(table, first, addr), line) << "address " << addr;
    lines.insert(line);
  }
  EXPECT_EQ(lines.count(310), 1u) << "the long jump past the blank lines was decoded";
}

// Every CPython minor version the built-in reader knows, against a real
// interpreter of it: pyenv's (~/.pyenv/versions/3.X.*), Debian's for 3.11.
// A version not installed here is skipped, saying so.
class PythonVersionTest : public StacksTest, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    StacksTest::SetUp();
    const std::string minor = GetParam();
    if (minor == "3.14" || minor == "3.15" || minor == "3.14d") return SetUpSid(minor);
    if (minor == "3.11") {
      if (access("/usr/bin/python3.11", X_OK) == 0) python_ = "/usr/bin/python3.11";
    } else {
      python_ = FindCPython({("python" + minor).c_str()});
    }
    if (python_.empty()) {
      GTEST_SKIP() << "no CPython " << minor << " on this machine (pyenv's ~/.pyenv/versions/"
                   << minor << ".*, or /usr/bin/python3.11 for 3.11)";
    }
  }
  // Debian sid's python3.14, python3.15 and python3.14d (python3.14-dbg, the
  // debug build), in a sid tree at $DRUN_SID_ROOT
  // (default /var/lib/drun-sid; docs/stacks.md says how to make one)
  // whose /tmp is this machine's: python_ is a wrapper that execs it there
  // (chroot(8), in the caller's working directory), so the pid is Python's.
  void SetUpSid(const std::string& minor) {
    const char* env = getenv("DRUN_SID_ROOT");
    const std::string root = env != nullptr && *env != '\0' ? env : "/var/lib/drun-sid";
    const std::string python = "/usr/bin/python" + minor;
    if (access((root + python).c_str(), X_OK) != 0) {
      GTEST_SKIP() << "no CPython " << minor << " in a Debian sid tree at " << root
                   << " (set DRUN_SID_ROOT)";
    }
    if (geteuid() != 0) GTEST_SKIP() << "chroot into " << root << " needs root";
    if (access((root + dir_).c_str(), F_OK) != 0) {
      GTEST_SKIP() << root << "/tmp is not this machine's /tmp (bind-mount it)";
    }
    python_ = dir_ + "/python" + minor;
    std::ofstream(python_) << "#!/bin/sh\nexec /usr/sbin/chroot " << root
                           << " /bin/sh -c 'cd \"$0\" 2>/dev/null || cd /; exec " << python
                           << " \"$@\"' \"$PWD\" \"$@\"\n";
    ASSERT_EQ(chmod(python_.c_str(), 0755), 0);
  }
  bool IsThisVersion(const std::string& version) const {
    return version == Minor() || absl::StartsWith(version, Minor() + ".");
  }
  // "3.14" of "3.14d" (a debug build: python3.14d).
  std::string Minor() const { return std::string(absl::StripSuffix(GetParam(), "d")); }
  std::string python_;
};

// The main thread sleeps under a coroutine, a generator and 201 recursive
// calls; another thread sleeps in its own function. Both say so (the main
// thread "main", the other its OS thread id) from the statement they sleep on.
TEST_P(PythonVersionTest, ThreadsRecursionGeneratorAndCoroutineWithSourceLines) {
  const std::string script =
      "import os, threading, time\n"                                                   // 1
      "def sleeper():\n"                                                               // 2
      "    os.write(1, b'main\\n') and time.sleep(10**6)\n"                            // 3
      "async def coro():\n"                                                            // 4
      "    sleeper()\n"                                                                // 5
      "def gen():\n"                                                                   // 6
      "    yield coro().send(None)\n"                                                  // 7
      "def recurse(n):\n"                                                              // 8
      "    return next(gen()) if n == 0 else recurse(n - 1)\n"                         // 9
      "def worker():\n"                                                                // 10
      "    os.write(1, b'%d\\n' % threading.get_native_id()) and time.sleep(10**6)\n"  // 11
      "threading.Thread(target=worker, daemon=True).start()\n"                         // 12
      "recurse(200)\n";                                                                // 13
  std::string path;
  std::vector<std::string> said;
  Child py = StartPython(script, 2, &path, &said, python_);
  int worker_tid = 0;
  for (const std::string& line : said) {
    if (line != "main") {
      ASSERT_TRUE(absl::SimpleAtoi(line, &worker_tid)) << line;
    }
  }
  absl::StatusOr<ProcessStacks> s = Capture(py.pid(), CaptureOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->python_method, Method::kBuiltinPython) << s->unavailable;
  EXPECT_TRUE(s->unavailable.empty()) << s->unavailable;
  EXPECT_TRUE(IsThisVersion(s->python_version)) << s->python_version;
  const ThreadStack* main = FindThread(*s, py.pid());
  ASSERT_NE(main, nullptr) << FormatText(*s);
  ASSERT_EQ(main->python.size(), 205u) << FormatText(*s);
  EXPECT_FALSE(main->python_truncated);
  struct Want {
    size_t index;
    const char* function;
    int line;
  };
  for (const Want& w :
       {Want{0, "sleeper", 3}, Want{1, "coro", 5}, Want{2, "gen", 7}, Want{3, "recurse", 9},
        Want{203, "recurse", 9}, Want{204, "<module>", 13}}) {
    EXPECT_EQ(main->python[w.index].function, w.function) << w.index << "\n" << FormatText(*s);
    EXPECT_EQ(main->python[w.index].line, w.line) << w.index;
    EXPECT_EQ(main->python[w.index].file, path);
  }
  EXPECT_EQ(main->python[0].source, "os.write(1, b'main\\n') and time.sleep(10**6)");
  EXPECT_EQ(main->python[204].source, "recurse(200)");
  const ThreadStack* worker = FindThread(*s, worker_tid);
  ASSERT_NE(worker, nullptr) << worker_tid << "\n" << FormatText(*s);
  ASSERT_GE(worker->python.size(), 2u) << FormatText(*s);
  EXPECT_EQ(worker->python[0].function, "worker");
  EXPECT_EQ(worker->python[0].line, 11);
  // threading.py's frames: qualified names from 3.11 on (Thread._bootstrap).
  EXPECT_TRUE(absl::EndsWith(worker->python.back().function, "_bootstrap")) << FormatText(*s);
  EXPECT_FALSE(worker->python.back().source.empty()) << "threading.py is readable";
  const std::string text = FormatText(*s);
  EXPECT_NE(text.find(absl::StrCat("  File \"", path, "\", line 3, in sleeper\n",
                                   "    os.write(1, b'main\\n') and time.sleep(10**6)\n")),
            std::string::npos)
      << text;
}

// From 3.13 on the reader takes the offsets from the process's own
// _Py_DebugOffsets, and they agree with the ones generated from the same
// version's headers; before 3.13 there is no such table.
TEST_P(PythonVersionTest, OffsetsComeFromTheProcessFrom313AndAgreeWithTheHeaders) {
  std::string path;
  Child py = StartPython("import os, time\nos.write(1, b'ready\\n') and time.sleep(10**6)\n", 1,
                         &path, nullptr, python_);
  absl::StatusOr<std::vector<Mapping>> maps = ReadMaps(py.pid());
  ASSERT_TRUE(maps.ok()) << maps.status();
  absl::StatusOr<PythonTarget> target = FindPython(py.pid(), *maps);
  ASSERT_TRUE(target.ok()) << target.status();
  absl::StatusOr<PythonStacks> read = ReadPythonStacks(py.pid(), *target);
  ASSERT_TRUE(read.ok()) << read.status();
  const int minor = std::stoi(std::string(GetParam()).substr(2));
  EXPECT_EQ(read->published_offsets, minor >= 13);
  EXPECT_EQ(read->layout_differs, "");
  absl::StatusOr<ProcessStacks> s = Capture(py.pid(), CaptureOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(FormatText(*s).find("via _Py_DebugOffsets)") != std::string::npos, minor >= 13)
      << FormatText(*s);
}

// Source lines come from the file as the process sees it: a relative name
// (3.8 keeps the script's name as given) against the process's working
// directory; a name that is a FIFO gives no line and does not block the capture.
TEST_P(PythonVersionTest, SourceLinesOfRelativeNamesAndNoneForAFifo) {
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(dir_ + "/rel.py")
      << "import os, sys, time\n"
         "code = 'import os, time\\nos.write(1, b\"ready\\\\n\") and time.sleep(10**6)\\n'\n"
         "def run():\n"
         "    exec(compile(code, sys.argv[1], 'exec'))\n"
         "run()\n";
  UniqueFd r, w;
  ASSERT_TRUE(MakePipe(&r, &w));
  SpawnRequest req{{python_, "rel.py", fifo}, {"PATH=/usr/bin:/bin"}, dir_, -1, w.get(), -1};
  absl::StatusOr<pid_t> pid = SpawnProcessGroup(req);
  ASSERT_TRUE(pid.ok()) << pid.status();
  Child child(*pid);
  w.reset();
  char c;
  ASSERT_EQ(read(r.get(), &c, 1), 1);
  absl::StatusOr<ProcessStacks> s = Capture(*pid, CaptureOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  const ThreadStack* main = FindThread(*s, *pid);
  ASSERT_NE(main, nullptr);
  ASSERT_EQ(main->python.size(), 3u) << FormatText(*s);
  EXPECT_EQ(main->python[0].file, fifo);
  EXPECT_EQ(main->python[0].line, 2);
  EXPECT_EQ(main->python[0].source, "");
  EXPECT_EQ(main->python[1].function, "run");
  EXPECT_EQ(main->python[1].source, "exec(compile(code, sys.argv[1], 'exec'))");
  EXPECT_EQ(main->python[2].source, "run()");
  // Without source lines, none is read.
  CaptureOptions bare;
  bare.source_lines = false;
  s = Capture(*pid, bare);
  ASSERT_TRUE(s.ok()) << s.status();
  main = FindThread(*s, *pid);
  ASSERT_NE(main, nullptr);
  ASSERT_EQ(main->python.size(), 3u) << FormatText(*s);
  EXPECT_EQ(main->python[2].source, "");
}

// A recursion deeper than the reader goes (2500 calls, the recursion limit
// raised): the innermost 2048 frames, and a line saying the stack was cut.
TEST_P(PythonVersionTest, RecursionDeeperThanTheReaderGoesIsCutAndSaysSo) {
  const std::string script =
      "import os, sys, time\n"                                    // 1
      "sys.setrecursionlimit(10000)\n"                            // 2
      "def down(n):\n"                                            // 3
      "    if n == 0:\n"                                          // 4
      "        os.write(1, b'ready\\n') and time.sleep(10**6)\n"  // 5
      "    down(n - 1)\n"                                         // 6
      "down(2500)\n";                                             // 7
  std::string path;
  Child py = StartPython(script, 1, &path, nullptr, python_);
  absl::StatusOr<ProcessStacks> s = Capture(py.pid(), CaptureOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  const ThreadStack* main = FindThread(*s, py.pid());
  ASSERT_NE(main, nullptr);
  ASSERT_EQ(main->python.size(), static_cast<size_t>(kMaxPythonFrames));
  EXPECT_TRUE(main->python_truncated);
  EXPECT_EQ(main->python[0].line, 5);
  EXPECT_EQ(main->python[1].line, 6);
  EXPECT_EQ(main->python.back().function, "down");
  EXPECT_NE(FormatText(*s).find("deeper than 2048 frames; partial)\n"), std::string::npos);
}

// Threads start and end all the time while the process is read 100 times:
// every capture succeeds, and Python frames land only on threads the process
// has (3.8-3.10 find a thread's OS id in its struct pthread, which an ending
// thread zeroes).
TEST_P(PythonVersionTest, ThreadsComingAndGoingNeverGiveStrayThreads) {
  const std::string script =
      "import os, threading\n"
      "def work(n):\n"
      "    return sum(range(n))\n"
      "def churn():\n"
      "    while True:\n"
      "        ts = [threading.Thread(target=work, args=(1000,)) for _ in range(4)]\n"
      "        for t in ts: t.start()\n"
      "        for t in ts: t.join()\n"
      "threading.Thread(target=churn, daemon=True).start()\n"
      "os.write(1, b'ready\\n')\n"
      "churn()\n";
  std::string path;
  Child py = StartPython(script, 1, &path, nullptr, python_);
  const std::string stdlib = absl::StrCat("/lib/python", Minor(), "/");
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<ProcessStacks> s = Capture(py.pid(), CaptureOptions{});
    ASSERT_TRUE(s.ok()) << s.status();
    for (const ThreadStack& t : s->threads) {
      EXPECT_GT(t.tid, 0) << FormatText(*s);
      for (const Frame& f : t.python) {
        // The script, or the interpreter's own library (threading.py, _weakrefset.py).
        EXPECT_TRUE(f.file == path || absl::StrContains(f.file, stdlib)) << FormatText(*s);
      }
    }
    const ThreadStack* main = FindThread(*s, py.pid());
    ASSERT_NE(main, nullptr);
    ASSERT_FALSE(main->python.empty()) << FormatText(*s);
    if (!main->python_truncated) {
      EXPECT_EQ(main->python.back().function, "<module>");
    }
  }
}

// Names in each compact str kind (ASCII, Latin-1, UCS-2, UCS-4) and a file
// name that is not ASCII, under every version's str layout.
TEST_P(PythonVersionTest, NonAsciiNamesAreUtf8) {
  const std::string path = dir_ + "/st\u00e4ck.py";
  std::ofstream(path) << "import os, time\n"
                         "def \U00020000():\n"
                         "    os.write(1, b'ready\\n') and time.sleep(10**6)\n"
                         "def \u7720\u308b():\n"
                         "    \U00020000()\n"
                         "def schl\u00e4ft():\n"
                         "    \u7720\u308b()\n"
                         "schl\u00e4ft()\n";
  UniqueFd r, w;
  ASSERT_TRUE(MakePipe(&r, &w));
  SpawnRequest req{{python_, path}, {"PATH=/usr/bin:/bin"}, "", -1, w.get(), -1};
  absl::StatusOr<pid_t> pid = SpawnProcessGroup(req);
  ASSERT_TRUE(pid.ok()) << pid.status();
  Child child(*pid);
  w.reset();
  char c;
  ASSERT_EQ(read(r.get(), &c, 1), 1);
  absl::StatusOr<ProcessStacks> s = Capture(*pid, CaptureOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  const ThreadStack* main = FindThread(*s, *pid);
  ASSERT_NE(main, nullptr);
  ASSERT_EQ(main->python.size(), 4u) << FormatText(*s);
  EXPECT_EQ(main->python[0].function, "\U00020000");
  EXPECT_EQ(main->python[0].file, path);
  EXPECT_EQ(main->python[0].line, 3);
  EXPECT_EQ(main->python[1].function, "\u7720\u308b");
  EXPECT_EQ(main->python[1].source, "\U00020000()");
  EXPECT_EQ(main->python[2].function, "schl\u00e4ft");
  EXPECT_EQ(main->python[3].function, "<module>");
}

// A busy loop read 100 times: its frames change under the reader every
// microsecond. Every capture succeeds with frames of the script only.
TEST_P(PythonVersionTest, FramesChangingUnderTheReaderGiveBestEffortStacks) {
  const std::string script =
      "import os\n"                   // 1
      "def helper(i):\n"              // 2
      "    return i * 2\n"            // 3
      "def spin(n):\n"                // 4
      "    total = 0\n"               // 5
      "    for i in range(n):\n"      // 6
      "        total += helper(i)\n"  // 7
      "    return total\n"            // 8
      "os.write(1, b'ready\\n')\n"    // 9
      "while True:\n"                 // 10
      "    spin(1000)\n";             // 11
  std::string path;
  Child py = StartPython(script, 1, &path, nullptr, python_);
  const std::set<std::string> functions = {"<module>", "spin", "helper"};
  int truncated = 0;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<ProcessStacks> s = Capture(py.pid(), CaptureOptions{});
    ASSERT_TRUE(s.ok()) << s.status();
    const ThreadStack* main = FindThread(*s, py.pid());
    ASSERT_NE(main, nullptr);
    if (main->python_truncated) ++truncated;
    ASSERT_LE(main->python.size(), 3u) << FormatText(*s);
    for (const Frame& f : main->python) {
      EXPECT_EQ(f.file, path) << FormatText(*s);
      EXPECT_EQ(functions.count(f.function), 1u) << FormatText(*s);
      EXPECT_GE(f.line, 1);
      EXPECT_LE(f.line, 11);
    }
    if (!main->python_truncated) {
      ASSERT_FALSE(main->python.empty()) << FormatText(*s);
      EXPECT_EQ(main->python.back().function, "<module>");
    }
  }
  EXPECT_LT(truncated, 10);
}

// The version's line table decoder against the interpreter's own answer for
// every code unit (co_lines() from 3.10, dis.findlinestarts() before) of code
// with forward and backward jumps, a long jump and lines without code.
TEST_P(PythonVersionTest, LineTableMatchesTheInterpreter) {
  const std::string script =
      "import dis, os, sys\n"
      "def f(x):\n"
      "    y = [i for i in range(x)\n"
      "         if i % 3]\n"
      "    for k in y:\n"
      "        if k > 5:\n"
      "            break\n"
      "    else:\n"
      "        pass\n" +
      std::string(300, '\n') +
      "    return (x +\n"
      "            y[0])\n"
      "c = f.__code__\n"
      "table = c.co_linetable if sys.version_info >= (3, 10) else c.co_lnotab\n"
      "out = [table.hex(), str(c.co_firstlineno)]\n"
      "if sys.version_info >= (3, 10):\n"
      "    for start, end, line in c.co_lines():\n"
      "        out += ['%d:%d' % (a, -1 if line is None else line) for a in range(start, end, 2)]\n"
      "else:\n"
      "    starts = list(dis.findlinestarts(c))\n"
      "    for a in range(0, len(c.co_code), 2):\n"
      "        out.append('%d:%d' % (a, [l for o, l in starts if o <= a][-1]))\n"
      "os.write(1, (' '.join(out) + '\\n').encode())\n";
  std::string path;
  std::vector<std::string> said;
  Child py = StartPython(script, 1, &path, &said, python_);
  ASSERT_EQ(said.size(), 1u);
  std::vector<std::string> f = absl::StrSplit(said[0], ' ');
  ASSERT_GT(f.size(), 10u);
  std::string table;
  for (size_t i = 0; i + 1 < f[0].size(); i += 2) {
    table.push_back(static_cast<char>(std::stoi(f[0].substr(i, 2), nullptr, 16)));
  }
  const std::string minor = GetParam();
  auto decode = minor == "3.8" || minor == "3.9" ? LnotabAddressToLine
                : minor == "3.10"                ? Py310AddressToLine
                                                 : Py311AddressToLine;
  const int first = std::stoi(f[1]);
  std::set<int> lines;
  for (size_t i = 2; i < f.size(); ++i) {
    std::vector<std::string> al = absl::StrSplit(f[i], ':');
    const int addr = std::stoi(al[0]), line = std::stoi(al[1]);
    EXPECT_EQ(decode(table, first, addr), line) << "address " << addr;
    lines.insert(line);
  }
  EXPECT_EQ(lines.count(310), 1u) << "the long jump past the blank lines was decoded";
}

INSTANTIATE_TEST_SUITE_P(CPython, PythonVersionTest,
                         ::testing::Values("3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14",
                                           "3.15", "3.14d"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = absl::StrCat("v", info.param);
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

}  // namespace
}  // namespace drun::stacks
