// First bytes: tells, from what a new connection sent first, whether it is a
// gRPC client (a drun agent) or a c10d TCPStore client (a worker), so that the
// rendezvous and the workers' store can share one port ("One port" in
// docs/architecture.md). Pure: no I/O; the caller peeks the bytes (MSG_PEEK)
// so that whoever gets the connection reads them again from the start.
//
// Rules (docs/c10d_store_protocol.md section 2; RFC 9113 section 3.4):
//  * gRPC speaks HTTP/2 with prior knowledge: the client's first 24 bytes are
//    the preface "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n". Its first byte 'P' (0x50)
//    is no opcode of any TCPStore dialect, so one byte separates the two
//    families; the whole preface is still required before saying kGrpc.
//  * Anything else must be a valid start of a TCPStore request stream (torch
//    1.13 opcodes, or 2.x's VALIDATE): checked with the store's own parser, so
//    the classifier accepts exactly what the store would.
//  * TLS (--rdzv-tls): a client's first record is a handshake record, whose
//    header starts 0x16 (content type "handshake") 0x03 (major version of
//    every SSL/TLS record layer) and a minor version 0..4: kTls after those
//    three bytes. 0x16 is no opcode of either TCPStore dialect either.
//  * A torch 1.13 TCPStore's second ("callback") connection sends nothing
//    until watchKey(): silence is kNeedMore, never a verdict; the caller
//    bounds how long it waits.
#ifndef DRUN_RENDEZVOUS_FIRST_BYTES_H_
#define DRUN_RENDEZVOUS_FIRST_BYTES_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace drun {

enum class FirstBytes {
  kNeedMore,  // not enough bytes to tell yet (or none)
  kGrpc,      // the HTTP/2 client preface
  kStore,     // a valid start of a TCPStore request stream
  kTls,       // a TLS record (an agent with --rdzv-tls)
  kGarbage,   // neither: close the connection
};

// Bytes worth peeking: the HTTP/2 preface's length. Fewer may already decide.
inline constexpr size_t kFirstBytesPeek = 24;
inline constexpr absl::string_view kHttp2Preface("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);

// Classifies the first bytes a client sent (`peeked`: the start of its
// stream, any length; only the first kFirstBytesPeek count). kGrpc and
// kGarbage are final; kStore means "valid so far" (the store's parser closes
// a stream that goes wrong later, as it does for any client).
FirstBytes ClassifyFirstBytes(absl::string_view peeked);

const char* FirstBytesName(FirstBytes kind);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_FIRST_BYTES_H_
