#include "launcher/ssh/ssh_console.h"

#include <poll.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "rendezvous/base/mutex.h"

namespace drun {

namespace {

// An agent's own line on its stderr starts with this (Log, Say).
constexpr absl::string_view kOwnLine = "drun: ";
// An agent's rank prefix is "[host:rankN]: " (or "[rankN]: ", "[host:setup]: "),
// well within this many bytes of a line's start.
constexpr size_t kMaxPrefix = 256;

}  // namespace

ConsoleHub::ConsoleHub(int out_fd, int err_fd)
    : console_(out_fd, err_fd) {}

ConsoleHub& ConsoleHub::Get() {
  static ConsoleHub* hub = new ConsoleHub;  // lives to the end; Drain() before exit
  return *hub;
}

int ConsoleHub::AddSource(int stream, std::chrono::milliseconds partial_delay) {
  // No prefix of its own (the agent's lines carry theirs, uncoloured).
  return AddSource(stream, partial_delay, "", "", -1);
}

int ConsoleHub::AddSource(int stream, std::chrono::milliseconds partial_delay, absl::string_view prefix,
                          absl::string_view cont_prefix, int colour_index) {
  MutexLock lock(&mu_);
  const int id = console_.AddSource(stream, prefix, cont_prefix, colour_index, /*has_file=*/false);
  // The agent held its partial lines for Console::kPartialDelay already
  // (one write each): a chunk split on its way waits only this much more.
  console_.SetPartialDelay(id, partial_delay);
  return id;
}

void ConsoleHub::SetContinuation(int id, absl::string_view cont_prefix) {
  MutexLock lock(&mu_);
  console_.SetContinuation(id, cont_prefix);
}

void ConsoleHub::RemoveSource(int id) {
  MutexLock lock(&mu_);
  console_.RemoveSource(id);
  console_.Flush();
}

void ConsoleHub::Write(int id, absl::string_view data) {
  mu_.Lock();
  console_.Write(id, data);
  console_.Flush();
  // A console that cannot keep up holds this host's thread (and so its
  // stream), not the launcher's loop; the others wait their turn.
  while (console_.congested()) {
    std::vector<int> fds = console_.BlockedFds();
    mu_.Unlock();
    if (!fds.empty()) {
      pollfd p{fds[0], POLLOUT, 0};
      poll(&p, 1, 100);
    }
    mu_.Lock();
    console_.Flush();
  }
  const bool due = console_.NextDeadline().has_value() || !console_.BlockedFds().empty();
  mu_.Unlock();
  if (due) wake_.Signal();
}

void ConsoleHub::Text(absl::string_view text) {
  MutexLock lock(&mu_);
  console_.Text(text);
  console_.Flush();
}

void ConsoleHub::InputEchoed() {
  MutexLock lock(&mu_);
  console_.InputEchoed();
  console_.Flush();
}

std::optional<OutClock::time_point> ConsoleHub::Tick() {
  wake_.Clear();
  MutexLock lock(&mu_);
  console_.ShowPartials(OutClock::now());
  console_.Flush();
  return console_.NextDeadline();
}

std::vector<int> ConsoleHub::BlockedFds() {
  MutexLock lock(&mu_);
  return console_.BlockedFds();
}

bool ConsoleHub::congested() {
  MutexLock lock(&mu_);
  return console_.congested();
}

void ConsoleHub::Drain() {
  MutexLock lock(&mu_);
  console_.Drain();
}

HostStream::HostStream(ConsoleHub* hub, int stream, std::string host,
                       std::chrono::milliseconds partial_delay)
    : hub_(hub), stream_(stream), host_(std::move(host)), id_(hub->AddSource(stream, partial_delay)) {}

HostStream::~HostStream() { hub_->RemoveSource(id_); }

void HostStream::Feed(absl::string_view data) {
  while (!data.empty()) {
    // The agent's own line, whole in one chunk (it writes each in one go):
    // said with the host's name. Split across chunks, it passes as it is.
    if (stream_ == 2 && at_start_ && absl::StartsWith(data, kOwnLine)) {
      const size_t nl = data.find('\n');
      if (nl != absl::string_view::npos) {
        hub_->Text(absl::StrCat(kOwnLine, host_, ": ", data.substr(kOwnLine.size(), nl + 1 - kOwnLine.size())));
        data.remove_prefix(nl + 1);
        continue;
      }
    }
    // Up to the next of the agent's own lines, in one write.
    size_t end = data.size();
    if (stream_ == 2) {
      const size_t own = data.find(absl::StrCat("\n", kOwnLine));
      if (own != absl::string_view::npos) end = own + 1;
    }
    Pass(data.substr(0, end));
    data.remove_prefix(end);
  }
}

void HostStream::Pass(absl::string_view data) {
  Learn(data);
  hub_->Write(id_, data);
  at_start_ = data.back() == '\n';
}

// The prefix of the line that may stay open: the last line begun in `data`.
void HostStream::Learn(absl::string_view data) {
  const size_t nl = data.rfind('\n');
  if (nl != absl::string_view::npos) {
    head_.clear();
    head_done_ = false;
    data.remove_prefix(nl + 1);
  }
  if (head_done_ || data.empty()) return;
  head_.append(data.data(), std::min(data.size(), kMaxPrefix - head_.size()));
  const size_t end = head_.find("]: ");
  if (head_.front() != '[' || (end == std::string::npos && head_.size() >= kMaxPrefix)) {
    head_done_ = true;  // not an agent's prefix: a cut line goes on bare
    return;
  }
  if (end == std::string::npos) return;
  head_done_ = true;
  std::string cont = absl::StrCat(absl::string_view(head_).substr(0, end), "]+ ");
  if (cont != cont_) {
    cont_ = std::move(cont);
    hub_->SetContinuation(id_, cont_);
  }
}

}  // namespace drun
