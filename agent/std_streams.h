// StdSpec (agent/output.h, the parsed -r/--redirects and -t/--tee value) to
// and from its JobSpec field, v1::StdStreams: the job carries the parsed form
// (each Streams as torchrun's digit), so no node parses the text again. The
// only code that reads the JobSpec's -r/-t fields.
#ifndef DRUN_AGENT_STD_STREAMS_H_
#define DRUN_AGENT_STD_STREAMS_H_

#include "agent/output.h"
#include "drun/v1/job.pb.h"

namespace drun {

inline v1::StdStreams ToProto(const StdSpec& s) {
  v1::StdStreams p;
  p.set_all(s.all.ToDigit());
  p.set_has_per_rank(s.has_per_rank);
  for (const auto& [rank, streams] : s.per_rank) (*p.mutable_per_rank())[rank] = streams.ToDigit();
  return p;
}

inline StdSpec FromProto(const v1::StdStreams& p) {
  StdSpec s;
  // A digit out of 0..3 cannot come from ParseStdSpec: read it as none.
  s.all = Streams::FromDigit(p.all()).value_or(Streams::None());
  s.has_per_rank = p.has_per_rank();
  for (const auto& [rank, digit] : p.per_rank()) {
    s.per_rank[rank] = Streams::FromDigit(digit).value_or(Streams::None());
  }
  return s;
}

}  // namespace drun

#endif  // DRUN_AGENT_STD_STREAMS_H_
