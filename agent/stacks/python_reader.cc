#include "agent/stacks/python_reader.h"

#include <errno.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/stacks/cpython_layout.h"
#include "agent/stacks/elf_symbols.h"

namespace drun::stacks {

std::string PythonVersionString(uint32_t hex) {
  return absl::StrCat(hex >> 24, ".", (hex >> 16) & 0xff, ".", (hex >> 8) & 0xff);
}

namespace {

// Signed and unsigned varints of the location table: 6 bits a byte, bit 6
// says another byte follows. `pos` advances; false when the table ends first.
bool ScanVarint(absl::string_view t, size_t* pos, uint32_t* value) {
  uint32_t v = 0;
  for (unsigned shift = 0; *pos < t.size() && shift < 32; shift += 6) {
    uint8_t b = static_cast<uint8_t>(t[(*pos)++]);
    v |= static_cast<uint32_t>(b & 63) << shift;
    if ((b & 64) == 0) {
      *value = v;
      return true;
    }
  }
  return false;
}

bool ScanSignedVarint(absl::string_view t, size_t* pos, int* value) {
  uint32_t u = 0;
  if (!ScanVarint(t, pos, &u)) return false;
  *value = (u & 1) ? -static_cast<int>(u >> 1) : static_cast<int>(u >> 1);
  return true;
}

}  // namespace

int Py311AddressToLine(absl::string_view t, int first_line, int addr) {
  if (addr < 0) return first_line;
  int line = first_line;
  int start = 0;
  size_t pos = 0;
  // Each entry: a first byte with bit 7 set, code in bits 3-6, (code units - 1)
  // in bits 0-2, then code-dependent bytes (all with bit 7 clear).
  while (pos < t.size()) {
    uint8_t first = static_cast<uint8_t>(t[pos]);
    if ((first & 0x80) == 0) return -1;  // not at an entry start: a corrupt table
    int code = (first >> 3) & 15;
    int end = start + ((first & 7) + 1) * 2;  // code units are 2 bytes in 3.11
    size_t p = pos + 1;
    int delta = 0;
    if (code == 13 || code == 14) {  // no-columns and long forms start with a line delta
      if (!ScanSignedVarint(t, &p, &delta)) return -1;
    } else if (code == 11 || code == 12) {  // one-line forms: delta in the code
      delta = code - 10;
    }
    line += delta;
    if (addr >= start && addr < end) return code == 15 ? -1 : line;
    start = end;
    // Skip the entry's remaining bytes: everything up to the next byte with bit 7.
    for (pos = pos + 1; pos < t.size() && (static_cast<uint8_t>(t[pos]) & 0x80) == 0; ++pos) {
    }
  }
  return -1;
}

int Py310AddressToLine(absl::string_view t, int first_line, int addr) {
  if (addr < 0) return first_line;
  // (byte delta, signed line delta) pairs; a line delta of -128 means "no line".
  int line = first_line;
  int end = 0;
  for (size_t pos = 0; pos + 1 < t.size(); pos += 2) {
    const int start = end;
    end += static_cast<uint8_t>(t[pos]);
    const int delta = static_cast<int8_t>(t[pos + 1]);
    if (delta != -128) line += delta;
    if (addr >= start && addr < end) return delta == -128 ? -1 : line;
  }
  return -1;
}

int LnotabAddressToLine(absl::string_view t, int first_line, int addr) {
  // (byte increment, signed line increment) pairs, as PyCode_Addr2Line reads them.
  int line = first_line;
  int at = 0;
  for (size_t pos = 0; pos + 1 < t.size(); pos += 2) {
    at += static_cast<uint8_t>(t[pos]);
    if (at > addr) break;
    line += static_cast<int8_t>(t[pos + 1]);
  }
  return line;
}

namespace {

// "python3.10" / "libpython3.10.so.1.0" -> "3.10"; "python3.13t" sets *free_threaded.
std::string VersionInName(absl::string_view base, bool* free_threaded) {
  size_t digits = base.find_first_of("0123456789");
  if (digits == absl::string_view::npos) return "";
  absl::string_view v = base.substr(digits);
  size_t stop = v.find_first_not_of("0123456789.");
  *free_threaded = stop != absl::string_view::npos && v[stop] == 't';
  v = v.substr(0, stop);
  while (!v.empty() && v.back() == '.') v.remove_suffix(1);
  return std::string(v);
}

// &_thread_db_pthread_tid in the glibc `pid` has mapped (libc.so.6 since
// glibc 2.34, libpthread before), 0 when there is none (musl, static).
uint64_t FindPthreadTidDescriptor(pid_t pid, const std::vector<Mapping>& maps) {
  static const std::vector<std::string> kWanted = {"_thread_db_pthread_tid"};
  for (const Mapping& m : maps) {
    if (m.offset != 0 || m.path.empty() || m.path[0] != '/') continue;
    absl::string_view base = m.path;
    base = base.substr(base.rfind('/') + 1);
    if (!absl::StartsWith(base, "libc.so") && !absl::StartsWith(base, "libc-") &&
        !absl::StartsWith(base, "libpthread")) {
      continue;
    }
    absl::StatusOr<std::shared_ptr<const ElfSymbols>> elf =
        LoadDynamicSymbols(absl::StrCat("/proc/", pid, "/root", m.path), kWanted);
    if (!elf.ok()) elf = LoadDynamicSymbols(m.path, kWanted);
    if (!elf.ok()) continue;
    auto it = (*elf)->symbols.find("_thread_db_pthread_tid");
    if (it != (*elf)->symbols.end()) return it->second + m.start - (*elf)->first_load_vaddr;
  }
  return 0;
}

}  // namespace

absl::StatusOr<PythonTarget> FindPython(pid_t pid, const std::vector<Mapping>& maps) {
  static const std::vector<std::string> kWanted = {
      "_PyRuntime",   "Py_Version",   "PyCode_Type",  "PyUnicode_Type",
      "PyBytes_Type", "PyFrame_Type", "_Py_RefTotal", "_Py_GetRefTotal"};
  for (const Mapping& m : maps) {
    if (m.offset != 0 || m.path.empty() || m.path[0] != '/') continue;
    absl::string_view base = m.path;
    base = base.substr(base.rfind('/') + 1);
    if (!absl::StartsWith(base, "python") && !absl::StartsWith(base, "libpython")) continue;
    // Through /proc/PID/root: the path is the process's own, which differs from
    // ours when it runs in another mount namespace (a container).
    absl::StatusOr<std::shared_ptr<const ElfSymbols>> elf =
        LoadDynamicSymbols(absl::StrCat("/proc/", pid, "/root", m.path), kWanted);
    if (!elf.ok()) elf = LoadDynamicSymbols(m.path, kWanted);
    if (!elf.ok()) continue;
    const auto& sym = (*elf)->symbols;
    auto runtime = sym.find("_PyRuntime");
    if (runtime == sym.end()) continue;
    const uint64_t bias = m.start - (*elf)->first_load_vaddr;
    auto at = [&](const char* name) -> uint64_t {
      auto it = sym.find(name);
      return it == sym.end() ? 0 : it->second + bias;
    };
    PythonTarget t;
    t.binary = m.path;
    t.runtime = runtime->second + bias;
    t.version = at("Py_Version");
    t.code_type = at("PyCode_Type");
    t.unicode_type = at("PyUnicode_Type");
    t.bytes_type = at("PyBytes_Type");
    t.frame_type = at("PyFrame_Type");
    t.debug_build = at("_Py_RefTotal") != 0 || at("_Py_GetRefTotal") != 0;
    t.name_version = VersionInName(base, &t.free_threaded);
    t.pthread_tid_desc = FindPthreadTidDescriptor(pid, maps);
    return t;
  }
  return absl::NotFoundError("no CPython interpreter mapped");
}

namespace {

constexpr int kMaxInterpreters = 64;
constexpr int kMaxThreads = 4096;
constexpr uint64_t kMaxString = 4096;
constexpr uint64_t kMaxLinetable = 1 << 20;

// Reads the target's memory; the first errno is kept for the caller's verdict.
class Remote {
 public:
  explicit Remote(pid_t pid) : pid_(pid) {}
  bool Read(uint64_t addr, void* out, size_t n) {
    if (addr == 0) return false;
    struct iovec local = {out, n};
    struct iovec remote = {reinterpret_cast<void*>(addr), n};
    ssize_t got = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
    if (got == static_cast<ssize_t>(n)) return true;
    if (got < 0 && first_errno_ == 0) first_errno_ = errno;
    return false;
  }
  template <typename T>
  bool Get(uint64_t addr, T* out) {
    return Read(addr, out, sizeof(T));
  }
  int first_errno() const { return first_errno_; }

 private:
  pid_t pid_;
  int first_errno_ = 0;
};

template <typename T>
T At(const std::vector<char>& buf, uint64_t offset) {
  T v;
  memcpy(&v, buf.data() + offset, sizeof v);
  return v;
}

void AppendUtf8(uint32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | ((c >> 18) & 0x07)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

// One read of an interpreter: its memory, where things are, and its layout.
struct Reader {
  Remote mem;
  const PythonTarget& t;
  const CPythonLayout& L;
  uint32_t pthread_tid_offset = 0;  // struct pthread's tid; 0: unknown
  // The code objects of C-stack frames seen (3.12+: the interpreter's
  // trampoline). A frame caught while one is being set up reads a stale owner
  // byte; its code still gives it away.
  std::set<uint64_t> trampolines;
};

// A compact str object (all code, file and function names are compact) as UTF-8.
bool ReadString(Reader& r, uint64_t addr, std::string* out) {
  const CPythonLayout& L = r.L;
  // The ASCII header first: a short ASCII string may end right at a page edge.
  std::vector<char> hdr(L.ascii_size);
  if (!r.mem.Read(addr, hdr.data(), hdr.size())) return false;
  if (r.t.unicode_type != 0 && At<uint64_t>(hdr, L.ob_type) != r.t.unicode_type) return false;
  const uint32_t state = At<uint32_t>(hdr, L.state_offset);
  const int64_t length = At<int64_t>(hdr, L.unicode_length);
  if ((state & L.state_compact_mask) == 0 || length < 0) return false;
  const uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(length), kMaxString);
  if (state & L.state_ascii_mask) {
    out->resize(n);
    return r.mem.Read(addr + L.ascii_size, out->data(), n);
  }
  const unsigned kind = (state & L.state_kind_mask) >> L.state_kind_shift;
  if (kind != 1 && kind != 2 && kind != 4) return false;
  std::vector<char> data(n * kind);
  if (!r.mem.Read(addr + L.compact_size, data.data(), data.size())) return false;
  out->clear();
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t c = 0;
    if (kind == 1) c = static_cast<uint8_t>(data[i]);
    if (kind == 2) c = At<uint16_t>(data, i * 2);
    if (kind == 4) c = At<uint32_t>(data, i * 4);
    // Lone surrogates (surrogateescape'd file names) have no UTF-8 form.
    const bool invalid = c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF);
    AppendUtf8(invalid ? 0xFFFD : c, out);
  }
  return true;
}

bool ReadBytes(Reader& r, uint64_t addr, std::string* out) {
  std::vector<char> hdr(r.L.bytes_data);
  if (!r.mem.Read(addr, hdr.data(), hdr.size())) return false;
  if (r.t.bytes_type != 0 && At<uint64_t>(hdr, r.L.ob_type) != r.t.bytes_type) return false;
  const int64_t size = At<int64_t>(hdr, r.L.var_size);
  if (size < 0 || static_cast<uint64_t>(size) > kMaxLinetable) return false;
  out->resize(static_cast<size_t>(size));
  return r.mem.Read(addr + r.L.bytes_data, out->data(), out->size());
}

// The bytes of a code object up to the last field the reader uses.
size_t CodeHeaderSize(const CPythonLayout& L) {
  uint32_t end = std::max({L.code_filename, L.code_name, L.code_qualname, L.code_linetable,
                           L.code_first_lineno, L.code_first_traceable}) +
                 8;
  return std::max(end, L.code_adaptive);
}

// A code object's header into `co`: false when it is not one (any more).
bool ReadCodeHeader(Reader& r, uint64_t code, std::vector<char>* co) {
  co->resize(CodeHeaderSize(r.L));
  if (!r.mem.Read(code, co->data(), co->size())) return false;
  return r.t.code_type == 0 || At<uint64_t>(*co, r.L.ob_type) == r.t.code_type;
}

// File, function (qualified name from 3.11) and line of a frame running the
// code whose header is `co`, at byte offset `addr` of its code (-1: not started).
bool ReadCodeNames(Reader& r, const std::vector<char>& co, int64_t addr, int line_override,
                   Frame* frame) {
  const CPythonLayout& L = r.L;
  std::string linetable;
  const bool named = (L.code_qualname != 0 &&
                      ReadString(r, At<uint64_t>(co, L.code_qualname), &frame->function)) ||
                     ReadString(r, At<uint64_t>(co, L.code_name), &frame->function);
  if (!named || !ReadString(r, At<uint64_t>(co, L.code_filename), &frame->file) ||
      !ReadBytes(r, At<uint64_t>(co, L.code_linetable), &linetable)) {
    return false;
  }
  const int first = At<int>(co, L.code_first_lineno);
  int line = -1;
  if (line_override > 0) {
    line = line_override;
  } else if (addr < 0 || addr > (int64_t{1} << 30)) {
    line = addr < 0 ? first : -1;
  } else if (L.line_table == 0) {
    line = LnotabAddressToLine(linetable, first, static_cast<int>(addr));
  } else if (L.line_table == 1) {
    line = Py310AddressToLine(linetable, first, static_cast<int>(addr));
  } else {
    line = Py311AddressToLine(linetable, first, static_cast<int>(addr));
  }
  frame->line = line < 0 ? 0 : line;
  return true;
}

enum class FrameRead { kFrame, kSkip, kTorn };

// 3.8-3.10: one PyFrameObject; fills `frame` and `*previous` (f_back).
FrameRead ReadFrameObject(Reader& r, uint64_t addr, Frame* frame, uint64_t* previous) {
  const CPythonLayout& L = r.L;
  std::vector<char> f(std::max({L.frame_back, L.frame_code, L.frame_lasti, L.frame_lineno}) + 8);
  if (!r.mem.Read(addr, f.data(), f.size())) return FrameRead::kTorn;
  if (r.t.frame_type != 0 && At<uint64_t>(f, L.ob_type) != r.t.frame_type) return FrameRead::kTorn;
  *previous = At<uint64_t>(f, L.frame_back);
  std::vector<char> co;
  if (!ReadCodeHeader(r, At<uint64_t>(f, L.frame_code), &co)) return FrameRead::kTorn;
  const int lasti = At<int>(f, L.frame_lasti);
  // 3.8 and 3.9 count f_lasti in bytes, 3.10 in code units; 3.10's f_lineno
  // is the line whenever it is set (tracing), the earlier ones' only while tracing.
  const int64_t addr_bytes = L.line_table == 0 ? lasti : int64_t{lasti} * L.code_unit_size;
  const int lineno = L.line_table == 1 ? At<int>(f, L.frame_lineno) : 0;
  if (!ReadCodeNames(r, co, lasti < 0 ? -1 : addr_bytes, lineno, frame)) return FrameRead::kTorn;
  return FrameRead::kFrame;
}

// 3.11-3.13: one _PyInterpreterFrame; fills `frame`, `*previous` and `*code`.
FrameRead ReadInterpreterFrame(Reader& r, uint64_t addr, Frame* frame, uint64_t* previous, uint64_t* code_out) {
  const CPythonLayout& L = r.L;
  std::vector<char> f(std::max({L.frame_back, L.frame_code, L.frame_instr}) + 8);
  f.resize(std::max<size_t>(f.size(), L.frame_owner + 1));
  if (!r.mem.Read(addr, f.data(), f.size())) return FrameRead::kTorn;
  *previous = At<uint64_t>(f, L.frame_back);
  const uint8_t owner = At<uint8_t>(f, L.frame_owner);
  // 3.14+: a _PyStackRef, whose low bits tag it (objects are 8-aligned at least).
  const uint64_t code = At<uint64_t>(f, L.frame_code) & ~uint64_t{7};
  *code_out = code;
  // A frame of the C stack (3.12, 3.13: the entry frame of each evaluation
  // loop) or of the interpreter's own (3.14+) is no Python frame.
  if (owner >= L.first_c_owner) {
    r.trampolines.insert(code);
    return FrameRead::kSkip;
  }
  std::vector<char> co;
  if (!ReadCodeHeader(r, code, &co)) return FrameRead::kTorn;
  const uint64_t instr = At<uint64_t>(f, L.frame_instr);
  const uint64_t first_instr = code + L.code_adaptive;
  const uint64_t first_traceable = At<int>(co, L.code_first_traceable);
  // An incomplete frame (still in its prologue) is not shown by CPython either.
  if (owner != L.owned_by_generator && instr < first_instr + first_traceable * L.code_unit_size) {
    return FrameRead::kSkip;
  }
  const int64_t addr_bytes = static_cast<int64_t>(instr - first_instr);
  if (!ReadCodeNames(r, co, addr_bytes < 0 ? (int64_t{1} << 31) : addr_bytes, 0, frame)) {
    return FrameRead::kTorn;
  }
  return FrameRead::kFrame;
}

// The bytes of a thread state up to the last field the reader uses.
size_t ThreadStateSize(const CPythonLayout& L) {
  return std::max({L.tstate_next, L.tstate_interp, L.tstate_thread_id, L.tstate_native_thread_id,
                   L.tstate_frame}) +
         8;
}

// The innermost frame of the thread state at `ts_addr` (first bytes `ts`); 0
// when it runs no Python code. *torn when it was caught changing.
uint64_t InnermostFrame(Reader& r, uint64_t ts_addr, const std::vector<char>& ts, bool* torn) {
  const CPythonLayout& L = r.L;
  const uint64_t ptr = At<uint64_t>(ts, L.tstate_frame);
  if (L.frame_kind != 1) return ptr;  // the frame itself
  const uint64_t cframe = ptr;
  uint64_t frame = 0;
  if (cframe == 0) return 0;  // a thread state not running Python code
  if (!r.mem.Get(cframe + L.cframe_current_frame, &frame)) {
    *torn = true;
    return 0;
  }
  // Only the root cframe is empty at rest. Any other was read between
  // _PyEval_EvalFrameDefault setting tstate->cframe and filling its
  // current_frame (a few instructions): torn, so the caller reads again.
  if (frame == 0 && cframe != ts_addr + L.tstate_root_cframe) *torn = true;
  return frame;
}

// The OS thread id of a thread state (first bytes `ts`): its own field
// (3.11+; 0 before the thread runs), else the tid in glibc's struct pthread
// its pthread_t points to, which the kernel zeroes when the thread exits.
// *none when there is no such OS thread; 0 without *none: not known (no glibc).
uint64_t OsThreadId(Reader& r, const std::vector<char>& ts, bool* none) {
  if (r.L.tstate_native_thread_id != 0) {
    const uint64_t id = At<uint64_t>(ts, r.L.tstate_native_thread_id);
    *none = id == 0;
    return id;
  }
  if (r.pthread_tid_offset == 0) return 0;
  int32_t tid = 0;
  const uint64_t pthread = At<uint64_t>(ts, r.L.tstate_thread_id);
  *none = !r.mem.Get(pthread + r.pthread_tid_offset, &tid) || tid <= 0;
  return *none ? 0 : static_cast<uint64_t>(tid);
}

// The thread state at `ts_addr`, whose first bytes are `ts`.
// `codes` gets each frame's code object (0 for a PyFrameObject), for DropTrampolines.
PythonThread ReadThread(Reader& r, uint64_t ts_addr, const std::vector<char>& ts, std::vector<uint64_t>* codes) {
  PythonThread thread;
  thread.native_thread_id = OsThreadId(r, ts, &thread.no_os_thread);
  if (thread.no_os_thread) return thread;
  uint64_t frame_addr = InnermostFrame(r, ts_addr, ts, &thread.truncated);
  for (int i = 0; frame_addr != 0; ++i) {
    if (i == kMaxPythonFrames) {
      thread.truncated = true;
      break;
    }
    Frame frame;
    uint64_t previous = 0, code = 0;
    FrameRead got = r.L.frame_kind == 0 ? ReadFrameObject(r, frame_addr, &frame, &previous)
                                        : ReadInterpreterFrame(r, frame_addr, &frame, &previous, &code);
    if (got == FrameRead::kTorn) {
      thread.truncated = true;
      break;
    }
    if (got == FrameRead::kFrame) {
      thread.frames.push_back(std::move(frame));
      codes->push_back(code);
    }
    frame_addr = previous;
  }
  return thread;
}

// Frames whose code is a trampoline's (read while their owner byte was stale) are no Python frames.
void DropTrampolines(const Reader& r, const std::vector<uint64_t>& codes, PythonThread* thread) {
  if (r.trampolines.empty()) return;
  std::vector<Frame> kept;
  for (size_t i = 0; i < thread->frames.size(); ++i) {
    if (!r.trampolines.count(codes[i])) kept.push_back(std::move(thread->frames[i]));
  }
  thread->frames = std::move(kept);
}

absl::Status ReadError(const Remote& mem, const char* what) {
  if (mem.first_errno() != 0) return absl::ErrnoToStatus(mem.first_errno(), what);
  return absl::DataLossError(what);
}

// The target's version and layout: _Py_DebugOffsets (3.13+), else Py_Version
// (3.11, 3.12), else its binary's name.
struct Version {
  std::string text;  // "3.12.1", "3.10"
  CPythonLayout layout;
  bool published = false;  // layout's offsets come from the target's _Py_DebugOffsets
  std::string differs;     // CompareLayouts(published, generated) when both exist
};

// The start of _Py_DebugOffsets at &_PyRuntime (3.13+): *hex and
// *free_threaded; false when the cookie is not there (before 3.13).
bool ReadDebugHeader(Remote& mem, const PythonTarget& t, uint32_t* hex, bool* free_threaded) {
  char head[24];
  if (!mem.Read(t.runtime, head, sizeof head) ||
      memcmp(head, kDebugCookie, sizeof kDebugCookie) != 0) {
    return false;
  }
  uint64_t version = 0, ft = 0;
  memcpy(&version, head + kDebugVersionAt, sizeof version);
  memcpy(&ft, head + kDebugFreeThreadedAt, sizeof ft);
  *hex = static_cast<uint32_t>(version);
  *free_threaded = ft != 0;
  return true;
}

// The version without _Py_DebugOffsets: Py_Version, else the binary's name.
absl::Status VersionWithoutTable(Remote& mem, const PythonTarget& t, uint32_t* hex,
                                 std::string* text) {
  if (t.version != 0) {
    if (!mem.Get(t.version, hex)) return ReadError(mem, "reading Py_Version");
    *text = PythonVersionString(*hex);
    return absl::OkStatus();
  }
  std::vector<absl::string_view> parts = absl::StrSplit(t.name_version, '.');
  uint32_t major = 0, minor = 0;
  if (parts.size() < 2 || !absl::SimpleAtoi(parts[0], &major) ||
      !absl::SimpleAtoi(parts[1], &minor) || major > 255 || minor > 255) {
    return absl::FailedPreconditionError(
        absl::StrCat("CPython of unknown version (", t.binary,
                     " exports no Py_Version and its name has no version) not readable by drun"));
  }
  *hex = (major << 24) | (minor << 16);
  *text = absl::StrCat(major, ".", minor);
  return absl::OkStatus();
}

// The offsets the target publishes, over `base` (its version's generated
// layout, or the newest drun has for a newer version). A debug build is read
// only with offsets of its own.
absl::Status ReadPublishedLayout(Remote& mem, const PythonTarget& t, const CPythonLayout& base,
                                 bool newer, Version* v) {
  std::string table(base.debug_offsets_size, '\0');
  if (!mem.Read(t.runtime, table.data(), table.size())) {
    return ReadError(mem, "reading _Py_DebugOffsets");
  }
  absl::StatusOr<CPythonLayout> published = LayoutFromDebugOffsets(base, table);
  if (!published.ok() && t.debug_build) {  // e.g. --with-trace-refs: ob_type moved
    return absl::FailedPreconditionError(absl::StrCat(
        "CPython ", v->text, " debug build not readable by drun: ", published.status().message()));
  }
  if (!published.ok()) {
    // A table of a version drun knows that it cannot use: the generated offsets stand.
    if (!newer) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "CPython ", v->text, " not readable by drun: ", published.status().message(),
        ", so its table is not laid out as CPython ", base.version_hex >> 24, ".",
        (base.version_hex >> 16) & 0xff, "'s (drun reads CPython ", CPythonLayoutRange(), ")"));
  }
  if (!newer) v->differs = CompareLayouts(*published, base);
  v->layout = *published;
  v->published = true;
  return absl::OkStatus();
}

absl::StatusOr<Version> ResolveVersion(Remote& mem, const PythonTarget& t) {
  uint32_t hex = 0;
  bool free_threaded = t.free_threaded;
  Version v;
  const bool table = ReadDebugHeader(mem, t, &hex, &free_threaded);
  if (table) {
    v.text = PythonVersionString(hex);
  } else if (absl::Status s = VersionWithoutTable(mem, t, &hex, &v.text); !s.ok()) {
    return s;
  }
  // Free-threaded: another object layout than the generated ones. Debug:
  // the same layout as a release build's from 3.13 (Py_DEBUG no longer
  // implies Py_TRACE_REFS), read with the offsets it publishes; unknown before.
  if (free_threaded || (t.debug_build && !table)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CPython ", v.text, free_threaded ? " free-threaded" : " debug", " build not readable by drun"));
  }
  const CPythonLayout* base = FindCPythonLayout(hex);
  // A version newer than drun knows that publishes its offsets: read with
  // them, over the newest layout's constants (line table, str bits, owners).
  const bool newer = base == nullptr && table && hex > NewestCPythonLayout().version_hex;
  if (newer) base = &NewestCPythonLayout();
  if (base == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CPython ", v.text, " not readable by drun (it reads CPython ", CPythonLayoutRange(), ")"));
  }
  v.layout = *base;
  if (table && base->debug_offsets_size != 0) {
    if (absl::Status s = ReadPublishedLayout(mem, t, *base, newer, &v); !s.ok()) return s;
  }
  return v;
}

// struct pthread's tid offset from glibc's descriptor {bits, count, offset}; 0 when unknown.
uint32_t PthreadTidOffset(Remote& mem, const PythonTarget& t) {
  uint32_t desc[3] = {0, 0, 0};
  if (t.pthread_tid_desc == 0 || !mem.Get(t.pthread_tid_desc, &desc)) return 0;
  if (desc[0] != 32 || desc[1] != 1 || desc[2] == 0 || desc[2] > 65536) return 0;
  return desc[2];
}

}  // namespace

absl::StatusOr<PythonStacks> ReadPythonStacks(pid_t pid, const PythonTarget& t) {
  Remote version_mem(pid);
  absl::StatusOr<Version> version = ResolveVersion(version_mem, t);
  if (!version.ok()) return version.status();
  Reader r{Remote(pid), t, version->layout, 0, {}};
  const CPythonLayout& L = r.L;
  if (L.tstate_native_thread_id == 0) r.pthread_tid_offset = PthreadTidOffset(r.mem, t);
  PythonStacks out;
  out.version = version->text;
  out.published_offsets = version->published;
  out.layout_differs = version->differs;
  uint64_t interp = 0;
  if (!r.mem.Get(t.runtime + L.runtime_interpreters_head, &interp)) {
    return ReadError(r.mem, "reading _PyRuntime");
  }
  std::vector<char> ts(ThreadStateSize(L));
  std::vector<std::vector<uint64_t>> codes;  // per thread read, per frame
  int threads = 0;
  for (int i = 0; interp != 0 && i < kMaxInterpreters; ++i) {
    uint64_t tstate = 0;
    if (!r.mem.Get(interp + L.interp_threads_head, &tstate)) break;
    for (; tstate != 0 && threads < kMaxThreads; ++threads) {
      if (!r.mem.Read(tstate, ts.data(), ts.size()) ||
          At<uint64_t>(ts, L.tstate_interp) != interp) {
        out.torn = true;
        break;
      }
      codes.emplace_back();
      out.threads.push_back(ReadThread(r, tstate, ts, &codes.back()));
      tstate = At<uint64_t>(ts, L.tstate_next);
    }
    if (!r.mem.Get(interp + L.interp_next, &interp)) break;
  }
  for (size_t i = 0; i < out.threads.size(); ++i) DropTrampolines(r, codes[i], &out.threads[i]);
  // Nothing at all read: say why (permission, process gone) instead of "no threads".
  if (out.threads.empty() && r.mem.first_errno() != 0) {
    return ReadError(r.mem, "reading thread states");
  }
  return out;
}

}  // namespace drun::stacks
