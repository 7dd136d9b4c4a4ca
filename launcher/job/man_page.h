// drun(1), generated from the same option table as --help (KnownOptions()), so the two
// cannot drift apart. The build writes it to drun.1 with the drun_manpage tool.
#ifndef DRUN_LAUNCHER_MAN_PAGE_H_
#define DRUN_LAUNCHER_MAN_PAGE_H_

#include <string>

namespace drun {

// The manual page as troff source using the man(7) macros: NAME, SYNOPSIS, DESCRIPTION,
// OPTIONS (one subsection per --help group), JOB FILES, ENVIRONMENT, EXIT STATUS, FILES,
// EXAMPLES, SEE ALSO. Deterministic: no dates or host names, so builds are reproducible.
std::string ManPage();

}  // namespace drun

#endif  // DRUN_LAUNCHER_MAN_PAGE_H_
