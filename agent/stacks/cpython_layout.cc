#include "agent/stacks/cpython_layout.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace drun::stacks {
namespace {

#include "agent/stacks/cpython_layouts_gen.inc"

uint32_t MajorMinor(uint32_t hex) { return hex >> 16; }

// One offset CPython publishes: the layout's field, and where in
// _Py_DebugOffsets the value sits.
struct Published {
  const char* name;
  uint32_t CPythonLayout::*field;
  uint32_t CPythonLayout::*position;
};

#define DRUN_PUBLISHED(f) {#f, &CPythonLayout::f, &CPythonLayout::dbg_##f}
constexpr Published kPublished[] = {
    DRUN_PUBLISHED(runtime_interpreters_head), DRUN_PUBLISHED(interp_next),
    DRUN_PUBLISHED(interp_threads_head),       DRUN_PUBLISHED(tstate_next),
    DRUN_PUBLISHED(tstate_interp),             DRUN_PUBLISHED(tstate_frame),
    DRUN_PUBLISHED(tstate_thread_id),          DRUN_PUBLISHED(tstate_native_thread_id),
    DRUN_PUBLISHED(frame_back),                DRUN_PUBLISHED(frame_code),
    DRUN_PUBLISHED(frame_instr),               DRUN_PUBLISHED(frame_owner),
    DRUN_PUBLISHED(code_filename),             DRUN_PUBLISHED(code_name),
    DRUN_PUBLISHED(code_qualname),             DRUN_PUBLISHED(code_linetable),
    DRUN_PUBLISHED(code_first_lineno),         DRUN_PUBLISHED(code_adaptive),
    DRUN_PUBLISHED(ob_type),                   DRUN_PUBLISHED(var_size),
    DRUN_PUBLISHED(bytes_data),                DRUN_PUBLISHED(state_offset),
    DRUN_PUBLISHED(unicode_length),            DRUN_PUBLISHED(ascii_size),
};
#undef DRUN_PUBLISHED

// No struct the reader walks is a MiB long: a larger "offset" is another field's value.
constexpr uint64_t kMaxOffset = 1 << 20;

// Orders every CPython's objects keep: a field read from another place of a
// table laid out differently breaks one of them (or kMaxOffset).
struct Before {
  uint32_t CPythonLayout::*first;
  uint32_t CPythonLayout::*second;
};
constexpr Before kOrders[] = {
    {&CPythonLayout::ob_type, &CPythonLayout::var_size},
    {&CPythonLayout::var_size, &CPythonLayout::bytes_data},
    {&CPythonLayout::ob_type, &CPythonLayout::unicode_length},
    {&CPythonLayout::unicode_length, &CPythonLayout::state_offset},
    {&CPythonLayout::state_offset, &CPythonLayout::ascii_size},
    {&CPythonLayout::ob_type, &CPythonLayout::code_filename},
    {&CPythonLayout::code_filename, &CPythonLayout::code_adaptive},
    {&CPythonLayout::tstate_next, &CPythonLayout::tstate_interp},
    {&CPythonLayout::tstate_interp, &CPythonLayout::tstate_thread_id},
    {&CPythonLayout::tstate_thread_id, &CPythonLayout::tstate_native_thread_id},
};

}  // namespace

const CPythonLayout* FindCPythonLayout(uint32_t version_hex) {
  for (const CPythonLayout& l : kGeneratedLayouts) {
    if (MajorMinor(l.version_hex) == MajorMinor(version_hex)) return &l;
  }
  return nullptr;
}

const CPythonLayout& NewestCPythonLayout() {
  return kGeneratedLayouts[sizeof kGeneratedLayouts / sizeof kGeneratedLayouts[0] - 1];
}

std::string CPythonLayoutRange() {
  const CPythonLayout& first = kGeneratedLayouts[0];
  const CPythonLayout& last = NewestCPythonLayout();
  return absl::StrCat(first.version_hex >> 24, ".", (first.version_hex >> 16) & 0xff, "-",
                      last.version_hex >> 24, ".", (last.version_hex >> 16) & 0xff);
}

absl::StatusOr<CPythonLayout> LayoutFromDebugOffsets(const CPythonLayout& base,
                                                     absl::string_view table) {
  if (base.debug_offsets_size == 0 || table.size() < base.debug_offsets_size) {
    return absl::InvalidArgumentError("no _Py_DebugOffsets layout for this version");
  }
  CPythonLayout l = base;
  for (const Published& p : kPublished) {
    const uint32_t at = base.*p.position;
    if (at == 0) continue;
    uint64_t value = 0;
    memcpy(&value, table.data() + at, sizeof value);
    if (value >= kMaxOffset) {
      return absl::FailedPreconditionError(
          absl::StrCat("its _Py_DebugOffsets gives ", p.name, " = ", value));
    }
    l.*p.field = static_cast<uint32_t>(value);
  }
  // An object's type pointer sits where it always did (8: after the refcount).
  if (l.ob_type != base.ob_type) {
    return absl::FailedPreconditionError(
        absl::StrCat("its _Py_DebugOffsets gives ob_type = ", l.ob_type));
  }
  for (const Before& o : kOrders) {
    if (l.*o.first >= l.*o.second) {
      return absl::FailedPreconditionError(
          "its _Py_DebugOffsets gives object fields out of their order");
    }
  }
  return l;
}

std::string CompareLayouts(const CPythonLayout& published, const CPythonLayout& generated) {
  std::vector<std::string> differ;
  for (const Published& p : kPublished) {
    if (published.*p.field != generated.*p.field) {
      differ.push_back(absl::StrCat(p.name, " ", published.*p.field, "/", generated.*p.field));
    }
  }
  return absl::StrJoin(differ, ", ");
}

}  // namespace drun::stacks
