// The agent's CaptureFn (agent/stack_dump.h) made of drun::stacks::Capture:
// where one worker is, with the innermost frame of its main thread as a
// short "where" ("train.py:42 in step" for Python, else the innermost native
// function with a name; "" when neither is known) for the hang table.
#ifndef DRUN_AGENT_STACKS_RANK_CAPTURE_H_
#define DRUN_AGENT_STACKS_RANK_CAPTURE_H_

#include "agent/stack_dump.h"

namespace drun {

RankStack CaptureRank(const RankTarget& target);

}  // namespace drun

#endif  // DRUN_AGENT_STACKS_RANK_CAPTURE_H_
