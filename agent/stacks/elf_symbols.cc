#include "agent/stacks/elf_symbols.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rendezvous/base/mutex.h"
#include "rendezvous/base/unique_fd.h"

namespace drun::stacks {
namespace {

// A read-only mapping of a whole file that unmaps itself.
class MappedFile {
 public:
  MappedFile(void* data, size_t size) : data_(data), size_(size) {}
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data_ != MAP_FAILED) munmap(data_, size_);
  }
  const char* data() const { return static_cast<const char*>(data_); }
  size_t size() const { return size_; }

 private:
  void* data_;
  size_t size_;
};

// True when [off, off + len) lies inside a file of `size` bytes.
bool Within(uint64_t off, uint64_t len, size_t size) { return off <= size && len <= size - off; }

absl::StatusOr<ElfSymbols> Parse(const MappedFile& f, const std::set<std::string>& wanted) {
  const char* d = f.data();
  if (f.size() < sizeof(Elf64_Ehdr) || memcmp(d, ELFMAG, SELFMAG) != 0 ||
      d[EI_CLASS] != ELFCLASS64) {
    return absl::InvalidArgumentError("not a 64-bit ELF file");
  }
  Elf64_Ehdr eh;
  memcpy(&eh, d, sizeof eh);
  ElfSymbols out;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    uint64_t off = eh.e_phoff + static_cast<uint64_t>(i) * eh.e_phentsize;
    if (!Within(off, sizeof ph, f.size())) break;
    memcpy(&ph, d + off, sizeof ph);
    if (ph.p_type == PT_LOAD && ph.p_offset == 0) {
      out.first_load_vaddr = ph.p_vaddr & ~uint64_t{0xfff};
      break;
    }
  }
  for (int i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh, strtab;
    uint64_t off = eh.e_shoff + static_cast<uint64_t>(i) * eh.e_shentsize;
    if (!Within(off, sizeof sh, f.size())) break;
    memcpy(&sh, d + off, sizeof sh);
    if (sh.sh_type != SHT_DYNSYM || sh.sh_entsize != sizeof(Elf64_Sym)) continue;
    uint64_t str_off = eh.e_shoff + static_cast<uint64_t>(sh.sh_link) * eh.e_shentsize;
    if (!Within(str_off, sizeof strtab, f.size())) break;
    memcpy(&strtab, d + str_off, sizeof strtab);
    if (!Within(sh.sh_offset, sh.sh_size, f.size()) ||
        !Within(strtab.sh_offset, strtab.sh_size, f.size())) {
      break;
    }
    for (uint64_t s = 0; s + sizeof(Elf64_Sym) <= sh.sh_size; s += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      memcpy(&sym, d + sh.sh_offset + s, sizeof sym);
      if (sym.st_shndx == SHN_UNDEF || sym.st_name >= strtab.sh_size) continue;
      const char* name = d + strtab.sh_offset + sym.st_name;
      size_t max_len = strtab.sh_size - sym.st_name;
      std::string n(name, strnlen(name, max_len));
      if (wanted.count(n) != 0) out.symbols[n] = sym.st_value;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ElfSymbols>> LoadDynamicSymbols(
    const std::string& path, const std::vector<std::string>& wanted) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return absl::ErrnoToStatus(errno, path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return absl::ErrnoToStatus(errno, path);
  using Key = std::tuple<dev_t, ino_t, off_t, int64_t, int64_t, std::string>;
  Key key{st.st_dev,         st.st_ino,          st.st_size,
          st.st_mtim.tv_sec, st.st_mtim.tv_nsec, absl::StrJoin(wanted, ",")};
  static Mutex mu;
  static auto* cache = new std::map<Key, std::shared_ptr<const ElfSymbols>>();
  {
    MutexLock lock(&mu);
    auto it = cache->find(key);
    if (it != cache->end()) return it->second;
  }
  if (st.st_size <= 0) return absl::InvalidArgumentError(absl::StrCat(path, ": empty file"));
  size_t size = static_cast<size_t>(st.st_size);
  MappedFile file(mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0), size);
  if (file.data() == MAP_FAILED) return absl::ErrnoToStatus(errno, path);
  absl::StatusOr<ElfSymbols> parsed =
      Parse(file, std::set<std::string>(wanted.begin(), wanted.end()));
  if (!parsed.ok()) return parsed.status();
  auto result = std::make_shared<const ElfSymbols>(std::move(*parsed));
  MutexLock lock(&mu);
  // Bounded: a long-lived agent meets few distinct interpreters.
  if (cache->size() > 64) cache->clear();
  cache->emplace(key, result);
  return std::shared_ptr<const ElfSymbols>(result);
}

}  // namespace drun::stacks
