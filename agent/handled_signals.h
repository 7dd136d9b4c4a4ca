// --signals-to-handle (torchrun 2.x): which signals drun catches and passes to
// its workers. A stop signal in the list stops the workers with it (grace,
// then SIGKILL) and ends drun with 128+N; SIGUSR1/SIGUSR2 in it reach every
// worker and stop nothing. A signal left out is not caught: its default
// action applies to drun itself, as under torchrun, and the guardian then
// kills the workers' process groups (agent/process.h). Pure, except
// ApplySignalDisposition.
#ifndef DRUN_AGENT_HANDLED_SIGNALS_H_
#define DRUN_AGENT_HANDLED_SIGNALS_H_

#include <signal.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "drun/v1/job.pb.h"

namespace drun {

// The signals --signals-to-handle may name, in the order drun prints them:
// SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2. Also drun's default.
const std::vector<int>& ForwardableSignals();

// torchrun's default list, SIGTERM,SIGINT,SIGHUP,SIGQUIT (drun's adds SIGUSR1,SIGUSR2).
const std::vector<int>& TorchrunDefaultSignals();

// "SIGTERM,SIGUSR1" (torchrun's spelling; also TERM, sigterm, 15) into signal
// numbers, in the order given, without repeats. Errors name the bad entry
// and the signals drun can handle.
absl::StatusOr<std::vector<int>> ParseSignalList(absl::string_view text);

// The list the job handles: spec.signals_to_handle, or drun's default when empty.
std::vector<int> HandledSignals(const v1::JobSpec& spec);

// "SIGINT,SIGTERM": the value of the workers' TORCHELASTIC_SIGNALS_TO_HANDLE.
std::string SignalListText(const std::vector<int>& signals);

// Whether `sig` is one drun may stop or pass through: it passes the workers
// stop signals and SIGUSR1/SIGUSR2 only when the job handles them.
bool HandlesSignal(const v1::JobSpec& spec, int sig);

// Removes from `set` every signal whose disposition is SIG_IGN: one ignored
// when drun started (nohup's SIGHUP) stays ignored, as in any POSIX program
// that catches signals, since a blocked signal read through a signalfd would
// be caught after all. Call before drun sets any disposition of its own in
// `set` (drun ignores none of the stop signals itself).
void DropIgnoredSignals(sigset_t* set);

// The agent's signalfd mask: SIGCHLD and the handled signals, less those
// ignored when drun started (DropIgnoredSignals). The forwardable
// signals the job leaves out are unblocked in the calling thread (they were
// blocked at start-up, Agent::BlockHandledSignals), so their default action
// applies to drun.
sigset_t ApplySignalDisposition(const v1::JobSpec& spec);

}  // namespace drun

#endif  // DRUN_AGENT_HANDLED_SIGNALS_H_
