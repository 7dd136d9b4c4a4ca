#include "rendezvous/failure_repeat.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "rendezvous/base/signal_name.h"

namespace drun {

std::optional<FailureFingerprint> FingerprintOf(const v1::Failure& f) {
  if (f.signal() > 0 || f.hung()) return std::nullopt;
  FailureFingerprint fp;
  fp.rank = f.rank();
  fp.exit_code = f.exit_code();
  fp.stderr_tail.assign(f.stderr_tail().begin(), f.stderr_tail().end());
  fp.error_message = f.error_message();
  return fp;
}

bool FailureRepeat::OnRoundFailed(const v1::Failure& f) {
  std::optional<FailureFingerprint> now = FingerprintOf(f);
  const bool repeated = now && last_ && *now == *last_;
  last_ = std::move(now);
  return repeated;
}

namespace {

// "rank 3 on host a", "the --node-setup command on host a", "the workers on host a".
std::string Who(const v1::Failure& f) {
  if (f.not_started()) return absl::StrCat("the workers on host ", f.host(), " (none could start)");
  return f.rank() < 0 ? absl::StrCat("the --node-setup command on host ", f.host())
                      : absl::StrCat("rank ", f.rank(), " on host ", f.host());
}

// The traceback's last line (the exception), else the tail's last non-empty line.
std::string LastWords(const v1::Failure& f) {
  for (int i = f.stderr_tail_size() - 1; i >= 0; --i) {
    std::string line(absl::StripAsciiWhitespace(f.stderr_tail(i)));
    if (!line.empty()) return line.size() > 120 ? line.substr(0, 117) + "..." : line;
  }
  return "";
}

}  // namespace

std::string DescribeFailure(const v1::Failure& f) {
  if (f.not_started()) return absl::StrCat("host ", f.host(), " could not start its workers");
  if (f.hung()) return absl::StrCat(Who(f), " hung (--hang-timeout, exit code ", f.exit_code(), ")");
  std::string how;
  if (f.signal() > 0) {
    how = absl::StrCat("killed by ", SignalName(f.signal()));
  } else {
    how = absl::StrCat("exit code ", f.exit_code());
  }
  return absl::StrCat(Who(f), " failed (", how, ")");
}

std::string DescribeRepeat(const v1::Failure& f) {
  std::string how = absl::StrCat("exit code ", f.exit_code());
  const std::string words = LastWords(f);
  if (!words.empty()) absl::StrAppend(&how, ", ", words);
  return absl::StrCat(Who(f), " failed the same way in 2 rounds in a row (", how, ")");
}

}  // namespace drun
