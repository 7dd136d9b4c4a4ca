// libFuzzer target for the c10d store parser (and the state behind it).
//
// Input: byte 0 seeds how the rest is cut into chunks; the rest is one connection's stream.
// Checks, beyond ASan/UBSan:
//  * feeding the stream whole or in arbitrary chunks yields the same requests and verdict;
//  * every request re-encodes to bytes that parse back to the same request;
//  * applying the requests to a C10dStoreState (alternating two connections, then
//    disconnecting both) never crashes and leaves no parked wait or watch behind.
// Build and run: see docs/c10d_store.md.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "rendezvous/store/c10d_store_parser.h"
#include "rendezvous/store/c10d_store_state.h"
#include "tests/unit/c10d_store_wire.h"

namespace {

using drun::c10d_store::C10dStoreParser;
using drun::c10d_store::C10dStoreState;
using drun::c10d_store::ConnId;
using drun::c10d_store::Dialect;
using drun::c10d_store::Op;
using drun::c10d_store::Request;

class CountingSink : public drun::c10d_store::ReplySink {
 public:
  void Send(ConnId, absl::string_view bytes) override { bytes_ += bytes.size(); }
  size_t bytes_ = 0;
};

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "invariant violated: %s\n", what);
    abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  uint32_t rng = data[0] * 2654435761u + 1;
  const std::string stream(reinterpret_cast<const char*>(data + 1), size - 1);

  C10dStoreParser whole;
  std::vector<Request> whole_out;
  const bool whole_ok = whole.Feed(stream, &whole_out).ok();

  C10dStoreParser chunked;
  std::vector<Request> chunked_out;
  bool chunked_ok = true;
  for (size_t off = 0; off < stream.size();) {
    rng = rng * 1103515245u + 12345u;
    const size_t len = 1 + (rng >> 16) % 17;
    chunked_ok = chunked.Feed(absl::string_view(stream).substr(off, len), &chunked_out).ok() &&
                 chunked_ok;
    off += len;
  }
  Check(whole_ok == chunked_ok, "verdict depends on chunking");
  Check(whole_out == chunked_out, "requests depend on chunking");
  Check(whole.dialect() == chunked.dialect(), "dialect depends on chunking");
  if (whole_ok) Check(whole.idle() == chunked.idle(), "idle() depends on chunking");

  // Re-encode and re-parse.
  if (!whole_out.empty()) {
    const Dialect d = whole.dialect();
    std::string again;
    for (const Request& r : whole_out) again += drun::c10d_store::wire::Encode(d, r);
    C10dStoreParser reparse;
    std::vector<Request> reparsed;
    Check(reparse.Feed(again, &reparsed).ok(), "re-encoded requests do not parse");
    Check(reparsed == whole_out, "re-encoded requests parse differently");
    Check(reparse.dialect() == d, "re-encoded requests change dialect");
  }

  // Drive the state.
  C10dStoreState state;
  CountingSink sink;
  const Dialect d = whole.dialect();
  size_t i = 0;
  bool closed[2] = {false, false};
  for (Request& r : whole_out) {
    const ConnId conn = 1 + (i++ & 1);
    if (closed[conn - 1]) continue;
    if (!state.Apply(conn, d, std::move(r), sink).ok()) {
      state.Disconnect(conn);
      closed[conn - 1] = true;
    }
  }
  state.Disconnect(1);
  state.Disconnect(2);
  Check(state.num_parked_waits() == 0, "parked wait survives disconnect");
  Check(state.num_watches() == 0, "watch survives disconnect");
  return 0;
}
