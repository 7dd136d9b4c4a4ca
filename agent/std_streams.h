// StdSpec (agent/output.h, the parsed -r/--redirects and -t/--tee value) to
// and from its JobSpec field, v1::StdStreams: the job carries the parsed form,
// so no node parses the text again.
#ifndef DRUN_AGENT_STD_STREAMS_H_
#define DRUN_AGENT_STD_STREAMS_H_

#include "agent/output.h"
#include "drun/v1/job.pb.h"

namespace drun {

inline v1::StdStreams ToProto(const StdSpec& s) {
  v1::StdStreams p;
  p.set_all(s.all);
  p.set_has_per_rank(s.has_per_rank);
  for (const auto& [rank, bits] : s.per_rank) (*p.mutable_per_rank())[rank] = bits;
  return p;
}

inline StdSpec FromProto(const v1::StdStreams& p) {
  StdSpec s;
  s.all = p.all();
  s.has_per_rank = p.has_per_rank();
  for (const auto& [rank, bits] : p.per_rank()) s.per_rank[rank] = bits;
  return s;
}

}  // namespace drun

#endif  // DRUN_AGENT_STD_STREAMS_H_
