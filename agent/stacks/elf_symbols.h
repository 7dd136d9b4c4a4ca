// Looks up a few dynamic symbols (.dynsym, which survives stripping) of an
// ELF file on disk, and the link-time address of its first loadable segment
// so a caller can add the load bias a process mapped it at.
// Results are cached per file identity (device, inode, size, mtime): one
// python binary shared by 64 ranks is parsed once. Thread-safe.
#ifndef DRUN_AGENT_STACKS_ELF_SYMBOLS_H_
#define DRUN_AGENT_STACKS_ELF_SYMBOLS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace drun::stacks {

struct ElfSymbols {
  uint64_t first_load_vaddr = 0;            // p_vaddr of the PT_LOAD at file offset 0, page-aligned
  std::map<std::string, uint64_t> symbols;  // name -> st_value, only the names asked for
};

// Parses `path`'s dynamic symbol table keeping only `wanted` names that are
// defined there. Errors: the file cannot be opened, or is not a 64-bit ELF.
absl::StatusOr<std::shared_ptr<const ElfSymbols>> LoadDynamicSymbols(
    const std::string& path, const std::vector<std::string>& wanted);

}  // namespace drun::stacks

#endif  // DRUN_AGENT_STACKS_ELF_SYMBOLS_H_
