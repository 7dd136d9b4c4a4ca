#include "rendezvous/first_bytes.h"

#include <algorithm>
#include <vector>

#include "rendezvous/store/c10d_store_parser.h"

namespace drun {

namespace {
constexpr unsigned char kTlsHandshakeRecord = 0x16;
}  // namespace

FirstBytes ClassifyFirstBytes(absl::string_view peeked) {
  if (peeked.empty()) return FirstBytes::kNeedMore;
  if (peeked[0] == kHttp2Preface[0]) {
    const size_t n = std::min(peeked.size(), kHttp2Preface.size());
    if (peeked.substr(0, n) != kHttp2Preface.substr(0, n)) return FirstBytes::kGarbage;
    return n == kHttp2Preface.size() ? FirstBytes::kGrpc : FirstBytes::kNeedMore;
  }
  if (static_cast<unsigned char>(peeked[0]) == kTlsHandshakeRecord) {
    if (peeked.size() > 1 && peeked[1] != '\x03') return FirstBytes::kGarbage;
    if (peeked.size() < 3) return FirstBytes::kNeedMore;
    return static_cast<unsigned char>(peeked[2]) <= 4 ? FirstBytes::kTls : FirstBytes::kGarbage;
  }
  // The store's own parser: a stream it would refuse is refused here. Only
  // the first kFirstBytesPeek bytes count, so the verdict on a store
  // connection does not depend on how much of it was peeked.
  c10d_store::C10dStoreParser parser;
  std::vector<c10d_store::Request> requests;
  const absl::Status ok = parser.Feed(peeked.substr(0, kFirstBytesPeek), &requests);
  return ok.ok() ? FirstBytes::kStore : FirstBytes::kGarbage;
}

const char* FirstBytesName(FirstBytes kind) {
  switch (kind) {
    case FirstBytes::kNeedMore:
      return "need-more";
    case FirstBytes::kGrpc:
      return "grpc";
    case FirstBytes::kStore:
      return "store";
    case FirstBytes::kTls:
      return "tls";
    case FirstBytes::kGarbage:
      return "garbage";
  }
  return "?";
}

}  // namespace drun
