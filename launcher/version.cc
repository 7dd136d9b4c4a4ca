// --version: drun's version and the versions of the libraries it was built
// with. Kept apart from cli.cc so the light drun (single node) does not link gRPC.
#include <libssh/libssh.h>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/common.h"
#include "grpcpp/grpcpp.h"
#include "launcher/build_kind.h"
#include "launcher/job/cli.h"

namespace drun {

std::string VersionText() {
  return absl::StrCat(VersionWords(), " (", BuildKind(), "; gRPC ", grpc::Version(), ", protobuf ",
                      google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION),
                      ", Abseil ", ABSL_LTS_RELEASE_VERSION, ", libssh ", ssh_version(0),
                      ")\n");
}

}  // namespace drun
