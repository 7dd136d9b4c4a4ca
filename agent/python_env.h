// What kind of Python a worker runs, decided from the interpreter's own files
// (never from its name alone), so the summary's hint for a missing torch fits
// it: install torch into the venv or recreate it with --system-site-packages,
// install it into the conda env, pip install it for pyenv's Python, apt
// install python3-torch for the system's.
//   venv:   DIR/bin/python with DIR/pyvenv.cfg (venv, virtualenv, pyenv-virtualenv,
//           uv); include-system-site-packages and the base interpreter from it
//   conda:  DIR/bin/python with DIR/conda-meta/
//   pyenv:  ROOT/shims/python3 or ROOT/versions/V/bin/python3, with ROOT holding
//           both shims/ and versions/
//   system: /usr/bin/python3 or /bin/python3 (after symlinks)
// Anything else is KIND_UNKNOWN. The path is the one execvp found (a venv's
// python is a symlink to its base; it is looked at before any link is
// followed).
#ifndef DRUN_AGENT_PYTHON_ENV_H_
#define DRUN_AGENT_PYTHON_ENV_H_

#include <string>

#include "drun/v1/rendezvous.pb.h"

namespace drun {

v1::PythonEnv InspectPythonEnv(const std::string& interpreter);

}  // namespace drun

#endif  // DRUN_AGENT_PYTHON_ENV_H_
