// FailureRepeat: tells a deterministic failure from bad luck, for the restart
// policy (docs/semantics.md, "Restarts"); and the words for a failure.
//
// A worker failure has a fingerprint when it could be a bug in the program:
// it exited by itself (no signal: an OOM kill or a SIGKILL from outside is bad
// luck) and was not declared hung. Two failures are the same when the same
// rank (or the --node-setup command) ended with the same exit code and the
// same last output: its stderr tail (the traceback's location and exception)
// and its error file's message. A round whose failing rank printed anything
// different made progress, or at least failed differently, and so restarts.
//
// OnRoundFailed() is given every failed round in order and says whether it
// ended exactly as the one before it; OnRoundInterrupted() is told of a round
// that ended for another reason (a lost node, a newcomer), which breaks the
// streak.
#ifndef DRUN_RENDEZVOUS_FAILURE_REPEAT_H_
#define DRUN_RENDEZVOUS_FAILURE_REPEAT_H_

#include <optional>
#include <string>
#include <vector>

#include "drun/v1/rendezvous.pb.h"

namespace drun {

struct FailureFingerprint {
  int rank = 0;  // -1: the --node-setup command
  int exit_code = 0;
  std::vector<std::string> stderr_tail;
  std::string error_message;

  bool operator==(const FailureFingerprint& o) const {
    return rank == o.rank && exit_code == o.exit_code && stderr_tail == o.stderr_tail &&
           error_message == o.error_message;
  }
  bool operator!=(const FailureFingerprint& o) const { return !(*this == o); }
};

// The failure's fingerprint, or nullopt when it never counts as a repeat
// (killed by a signal, or hung).
std::optional<FailureFingerprint> FingerprintOf(const v1::Failure& f);

class FailureRepeat {
 public:
  // The running round failed with `f`. Returns true when the previous round
  // failed the same way (both with a fingerprint).
  bool OnRoundFailed(const v1::Failure& f);
  // The running round stopped for anything but a worker failure.
  void OnRoundInterrupted() { last_.reset(); }

 private:
  std::optional<FailureFingerprint> last_;
};

// "rank 3 on host a failed (exit code 1)", "the --node-setup command on host
// a failed (killed by SIGKILL)", "rank 0 on host a hung (--hang-timeout, ...)":
// what a failure is said as in the rendezvous' messages.
std::string DescribeFailure(const v1::Failure& f);

// "rank 1 on host a failed the same way in 2 rounds in a row (exit code 1,
// ValueError: bad)": what a repeated failure is said as, before the way out.
std::string DescribeRepeat(const v1::Failure& f);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_FAILURE_REPEAT_H_
