#include "agent/handled_signals.h"

#include <pthread.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rendezvous/base/signal_name.h"

namespace drun {

const std::vector<int>& ForwardableSignals() {
  static const std::vector<int> kAll = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  return kAll;
}

const std::vector<int>& TorchrunDefaultSignals() {
  static const std::vector<int> kTorchrun = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  return kTorchrun;
}

namespace {

// One entry: a forwardable signal by name (with or without SIG, any case) or number.
int SignalFromText(absl::string_view entry) {
  std::string name = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(entry));
  int number = 0;
  const bool numeric = absl::SimpleAtoi(name, &number);
  if (!numeric && !absl::StartsWith(name, "SIG")) name = absl::StrCat("SIG", name);
  for (int sig : ForwardableSignals()) {
    if (numeric ? sig == number : SignalName(sig) == name) return sig;
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::vector<int>> ParseSignalList(absl::string_view text) {
  std::vector<int> out;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    if (absl::StripAsciiWhitespace(entry).empty()) continue;
    const int sig = SignalFromText(entry);
    if (sig == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", entry, "' is not a signal drun can handle; write a list of ",
                       SignalListText(ForwardableSignals())));
    }
    if (std::find(out.begin(), out.end(), sig) == out.end()) out.push_back(sig);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the list is empty; name at least one of ", SignalListText(ForwardableSignals())));
  }
  return out;
}

std::vector<int> HandledSignals(const v1::JobSpec& spec) {
  if (spec.signals_to_handle().empty()) return ForwardableSignals();
  return {spec.signals_to_handle().begin(), spec.signals_to_handle().end()};
}

std::string SignalListText(const std::vector<int>& signals) {
  return absl::StrJoin(signals, ",", [](std::string* out, int sig) { out->append(SignalName(sig)); });
}

bool HandlesSignal(const v1::JobSpec& spec, int sig) {
  const std::vector<int> handled = HandledSignals(spec);
  return std::find(handled.begin(), handled.end(), sig) != handled.end();
}

void DropIgnoredSignals(sigset_t* set) {
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction now {};
    if (sigismember(set, sig) == 1 && sigaction(sig, nullptr, &now) == 0 && now.sa_handler == SIG_IGN) {
      sigdelset(set, sig);
    }
  }
}

sigset_t ApplySignalDisposition(const v1::JobSpec& spec) {
  sigset_t handled, left_out;
  sigemptyset(&handled);
  sigemptyset(&left_out);
  sigaddset(&handled, SIGCHLD);
  for (int sig : ForwardableSignals()) sigaddset(HandlesSignal(spec, sig) ? &handled : &left_out, sig);
  pthread_sigmask(SIG_UNBLOCK, &left_out, nullptr);
  DropIgnoredSignals(&handled);
  return handled;
}

}  // namespace drun
