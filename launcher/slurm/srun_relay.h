// srun's output under --launcher slurm. srun's I/O holds a task's bytes until
// a newline, so the agents write their console as relay frames, one line each
// (agent/output.h RelayFrames; the launch's console_relay says so). This reads
// one of srun's two streams back into the launcher's console
// (launcher/ssh/ssh_console.h):
//  - each remote worker stream (every rank of every host) is a source of the
//    console of its own, prefixed here, so the launcher's console keeps them
//    apart exactly as a one-node agent keeps its ranks: a partial line (a
//    prompt, a `\r` bar) shows as soon as its frame arrives (the agent held
//    it its own 30 ms already), two ranks' bytes never share a console line,
//    a cut line goes on under one continuation prefix, a typed line's echo
//    ends the open line (InputEchoed), and on a terminal every rank's `\r`
//    bar keeps a row of the live region;
//  - an agent's own line ("drun: ...") names its host;
//  - any other line (srun's own messages, an agent's before it read its
//    launch) passes as it is, whole.
#ifndef DRUN_LAUNCHER_SLURM_SRUN_RELAY_H_
#define DRUN_LAUNCHER_SLURM_SRUN_RELAY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "agent/output.h"
#include "launcher/ssh/ssh_console.h"

namespace drun {

class SrunOutputRelay {
 public:
  // stream: 1 = srun's stdout, 2 = its stderr.
  SrunOutputRelay(ConsoleHub* hub, int stream);
  ~SrunOutputRelay();  // what is pending goes out
  SrunOutputRelay(const SrunOutputRelay&) = delete;
  SrunOutputRelay& operator=(const SrunOutputRelay&) = delete;

  void Feed(absl::string_view data);
  // srun's stream ended: a last unframed partial line goes out.
  void Finish();
  // Reads from `fd` (non-blocking) into Feed, up to 1 MiB at a time (so a
  // busy srun never starves the caller's loop): kMore when it may hold more,
  // kEmpty when it holds nothing now, kEnded (after Finish) at end of file or
  // an error other than EAGAIN.
  enum class Read { kMore, kEmpty, kEnded };
  Read ReadFrom(int fd);

 private:
  void Take(const RelayOrigin& origin, absl::string_view bytes);

  ConsoleHub* hub_;
  int stream_;
  RelayDecoder decoder_;
  std::map<std::string, std::unique_ptr<HostStream>, std::less<>> hosts_;  // agents' own lines
  std::map<std::string, int, std::less<>> sources_;  // worker streams by prefix: the hub's source
  int plain_id_;  // the hub's source for lines that are no frames
};

}  // namespace drun

#endif  // DRUN_LAUNCHER_SLURM_SRUN_RELAY_H_
