#include "agent/stacks/cpython_layout.h"

#include "absl/strings/str_cat.h"

namespace drun::stacks {
namespace {

#include "agent/stacks/cpython_layouts_gen.inc"

uint32_t MajorMinor(uint32_t hex) { return hex >> 16; }

}  // namespace

const CPythonLayout* FindCPythonLayout(uint32_t version_hex) {
  for (const CPythonLayout& l : kGeneratedLayouts) {
    if (MajorMinor(l.version_hex) == MajorMinor(version_hex)) return &l;
  }
  return nullptr;
}

std::string CPythonLayoutRange() {
  const CPythonLayout& first = kGeneratedLayouts[0];
  const CPythonLayout& last = kGeneratedLayouts[sizeof kGeneratedLayouts / sizeof first - 1];
  return absl::StrCat(first.version_hex >> 24, ".", (first.version_hex >> 16) & 0xff, "-",
                      last.version_hex >> 24, ".", (last.version_hex >> 16) & 0xff);
}

}  // namespace drun::stacks
