// Modes of what drun writes with a job's content (logs, error files, reports,
// stack dumps): directories 0700 and files 0600, so a worker's output, which
// may print a key, is the job owner's alone. The umask can only narrow them.
#ifndef DRUN_RENDEZVOUS_BASE_PRIVATE_FILES_H_
#define DRUN_RENDEZVOUS_BASE_PRIVATE_FILES_H_

#include <sys/types.h>

#include <string>

namespace drun {

inline constexpr mode_t kPrivateDirMode = 0700;
inline constexpr mode_t kPrivateFileMode = 0600;

// Creates `path` and every missing parent, each new one with kPrivateDirMode
// (existing ones are left as they are). 0, or the errno of the first failure.
int MakePrivateDirs(const std::string& path);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_PRIVATE_FILES_H_
