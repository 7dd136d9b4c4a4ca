#include "agent/stacks/python_reader.h"

#include <errno.h>
#include <sys/uio.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/stacks/elf_symbols.h"

#if DRUN_HAVE_CPY311_OFFSETS
#include "cpython311_offsets.h"
#endif

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

absl::StatusOr<PythonTarget> FindPython(pid_t pid, const std::vector<Mapping>& maps) {
  static const std::vector<std::string> kWanted = {
      "_PyRuntime", "Py_Version", "PyCode_Type", "PyUnicode_Type", "PyBytes_Type", "_Py_RefTotal"};
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
    t.debug_build = at("_Py_RefTotal") != 0;
    // "python3.10" / "libpython3.10.so.1.0" -> "3.10", only for messages.
    size_t digits = base.find_first_of("0123456789");
    if (digits != absl::string_view::npos) {
      absl::string_view v = base.substr(digits);
      size_t stop = v.find_first_not_of("0123456789.");
      v = v.substr(0, stop);
      while (!v.empty() && v.back() == '.') v.remove_suffix(1);
      t.name_version = std::string(v);
    }
    return t;
  }
  return absl::NotFoundError("no CPython interpreter mapped");
}

#if !DRUN_HAVE_CPY311_OFFSETS

absl::StatusOr<PythonStacks> ReadPythonStacks(pid_t, const PythonTarget&) {
  return absl::FailedPreconditionError("built without CPython 3.11 offsets");
}

#else

namespace {

namespace off = py311;

constexpr int kMaxInterpreters = 64;
constexpr int kMaxThreads = 4096;
constexpr int kMaxFrames = 2048;
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

// A compact str object (all code, file and function names are compact) as UTF-8.
bool ReadString(Remote& mem, const PythonTarget& t, uint64_t addr, std::string* out) {
  // The ASCII header first: a short ASCII string may end right at a page edge.
  std::vector<char> hdr(off::kAsciiSize);
  if (!mem.Read(addr, hdr.data(), hdr.size())) return false;
  if (t.unicode_type != 0 && At<uint64_t>(hdr, off::kObType) != t.unicode_type) return false;
  const uint32_t state = At<uint32_t>(hdr, off::kStateOffset);
  const int64_t length = At<int64_t>(hdr, off::kUnicodeLength);
  if ((state & off::kStateCompactMask) == 0 || length < 0) return false;
  const uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(length), kMaxString);
  if (state & off::kStateAsciiMask) {
    out->resize(n);
    return mem.Read(addr + off::kAsciiSize, out->data(), n);
  }
  const unsigned kind = (state & off::kStateKindMask) >> off::kStateKindShift;
  if (kind != 1 && kind != 2 && kind != 4) return false;
  std::vector<char> data(n * kind);
  if (!mem.Read(addr + off::kCompactSize, data.data(), data.size())) return false;
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

bool ReadBytes(Remote& mem, const PythonTarget& t, uint64_t addr, std::string* out) {
  std::vector<char> hdr(off::kBytesData);
  if (!mem.Read(addr, hdr.data(), hdr.size())) return false;
  if (t.bytes_type != 0 && At<uint64_t>(hdr, off::kObType) != t.bytes_type) return false;
  const int64_t size = At<int64_t>(hdr, off::kVarSize);
  if (size < 0 || static_cast<uint64_t>(size) > kMaxLinetable) return false;
  out->resize(static_cast<size_t>(size));
  return mem.Read(addr + off::kBytesData, out->data(), out->size());
}

enum class FrameRead { kFrame, kSkip, kTorn };

// One _PyInterpreterFrame: fills `frame` and `*previous`.
FrameRead ReadFrame(Remote& mem, const PythonTarget& t, uint64_t addr, Frame* frame,
                    uint64_t* previous) {
  std::vector<char> f(off::kFrameOwner + 1);
  if (!mem.Read(addr, f.data(), f.size())) return FrameRead::kTorn;
  *previous = At<uint64_t>(f, off::kFramePrevious);
  const uint64_t code = At<uint64_t>(f, off::kFrameCode);
  const uint64_t prev_instr = At<uint64_t>(f, off::kFramePrevInstr);
  const char owner = At<char>(f, off::kFrameOwner);
  std::vector<char> co(off::kCodeAdaptive);
  if (!mem.Read(code, co.data(), co.size())) return FrameRead::kTorn;
  if (t.code_type != 0 && At<uint64_t>(co, off::kObType) != t.code_type) return FrameRead::kTorn;
  const uint64_t first_instr = code + off::kCodeAdaptive;
  const int first_traceable = At<int>(co, off::kCodeFirstTraceable);
  // An incomplete frame (still in its prologue) is not shown by CPython either.
  if (owner != static_cast<char>(off::kFrameOwnedByGenerator) &&
      prev_instr < first_instr + static_cast<uint64_t>(first_traceable) * off::kCodeUnitSize) {
    return FrameRead::kSkip;
  }
  std::string linetable;
  const uint64_t qualname = At<uint64_t>(co, off::kCodeQualname);
  if (!ReadString(mem, t, At<uint64_t>(co, off::kCodeFilename), &frame->file) ||
      !(ReadString(mem, t, qualname, &frame->function) ||
        ReadString(mem, t, At<uint64_t>(co, off::kCodeName), &frame->function)) ||
      !ReadBytes(mem, t, At<uint64_t>(co, off::kCodeLinetable), &linetable)) {
    return FrameRead::kTorn;
  }
  const int64_t addr_bytes = static_cast<int64_t>(prev_instr - first_instr);
  const int first_line = At<int>(co, off::kCodeFirstLineno);
  const int line = addr_bytes > (int64_t{1} << 30)
                       ? -1
                       : Py311AddressToLine(linetable, first_line, static_cast<int>(addr_bytes));
  frame->line = line < 0 ? 0 : line;
  return FrameRead::kFrame;
}

// The thread state at `ts_addr`, whose first bytes are `ts`.
PythonThread ReadThread(Remote& mem, const PythonTarget& t, uint64_t ts_addr,
                        const std::vector<char>& ts) {
  PythonThread thread;
  thread.native_thread_id = At<uint64_t>(ts, off::kTstateNativeThreadId);
  uint64_t frame_addr = 0;
  const uint64_t cframe = At<uint64_t>(ts, off::kTstateCframe);
  if (cframe == 0) return thread;  // a thread state not running Python code
  if (!mem.Get(cframe + off::kCframeCurrentFrame, &frame_addr)) {
    thread.truncated = true;
    return thread;
  }
  // Only the root cframe is empty at rest. Any other was read between
  // _PyEval_EvalFrameDefault setting tstate->cframe and filling its
  // current_frame (a few instructions): torn, so the caller reads again.
  if (frame_addr == 0 && cframe != ts_addr + off::kTstateRootCframe) {
    thread.truncated = true;
    return thread;
  }
  for (int i = 0; frame_addr != 0; ++i) {
    if (i == kMaxFrames) {
      thread.truncated = true;
      break;
    }
    Frame frame;
    uint64_t previous = 0;
    FrameRead r = ReadFrame(mem, t, frame_addr, &frame, &previous);
    if (r == FrameRead::kTorn) {
      thread.truncated = true;
      break;
    }
    if (r == FrameRead::kFrame) thread.frames.push_back(std::move(frame));
    frame_addr = previous;
  }
  return thread;
}

absl::Status ReadError(const Remote& mem, const char* what) {
  if (mem.first_errno() != 0) return absl::ErrnoToStatus(mem.first_errno(), what);
  return absl::DataLossError(what);
}

absl::StatusOr<std::string> CheckVersion(Remote& mem, const PythonTarget& t) {
  const uint32_t built = static_cast<uint32_t>(off::kHeadersVersionHex);
  if (t.version == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("CPython ", t.name_version.empty() ? "< 3.11" : t.name_version,
                     " not readable by drun (built for ", PythonVersionString(built), ")"));
  }
  uint32_t hex = 0;
  if (!mem.Get(t.version, &hex)) return ReadError(mem, "reading Py_Version");
  if (t.debug_build) {  // the generated offsets are a release build's
    return absl::FailedPreconditionError(
        absl::StrCat("CPython ", PythonVersionString(hex), " debug build not readable by drun"));
  }
  if ((hex >> 16) != (built >> 16)) {
    return absl::FailedPreconditionError(absl::StrCat("CPython ", PythonVersionString(hex),
                                                      " not readable by drun (built for ",
                                                      PythonVersionString(built), ")"));
  }
  return PythonVersionString(hex);
}

}  // namespace

absl::StatusOr<PythonStacks> ReadPythonStacks(pid_t pid, const PythonTarget& t) {
  Remote mem(pid);
  absl::StatusOr<std::string> version = CheckVersion(mem, t);
  if (!version.ok()) return version.status();
  PythonStacks out;
  out.version = *version;
  uint64_t interp = 0;
  if (!mem.Get(t.runtime + off::kRuntimeInterpretersHead, &interp)) {
    return ReadError(mem, "reading _PyRuntime");
  }
  static_assert(off::kTstateInterp < off::kTstateNativeThreadId, "one read covers both");
  std::vector<char> ts(off::kTstateNativeThreadId + sizeof(uint64_t));
  int threads = 0;
  for (int i = 0; interp != 0 && i < kMaxInterpreters; ++i) {
    uint64_t tstate = 0;
    if (!mem.Get(interp + off::kInterpThreadsHead, &tstate)) break;
    for (; tstate != 0 && threads < kMaxThreads; ++threads) {
      if (!mem.Read(tstate, ts.data(), ts.size()) || At<uint64_t>(ts, off::kTstateInterp) != interp) {
        out.torn = true;
        break;
      }
      out.threads.push_back(ReadThread(mem, t, tstate, ts));
      tstate = At<uint64_t>(ts, off::kTstateNext);
    }
    if (!mem.Get(interp + off::kInterpNext, &interp)) break;
  }
  // Nothing at all read: say why (permission, process gone) instead of "no threads".
  if (out.threads.empty() && mem.first_errno() != 0) return ReadError(mem, "reading thread states");
  return out;
}

#endif  // DRUN_HAVE_CPY311_OFFSETS

}  // namespace drun::stacks
