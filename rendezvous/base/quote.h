// Quoting text for the two audiences drun writes to: people (error messages that
// show user input) and POSIX sh (a remote command line over ssh).
#ifndef DRUN_RENDEZVOUS_BASE_QUOTE_H_
#define DRUN_RENDEZVOUS_BASE_QUOTE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace drun {

// 'text' for an error message: control bytes C-escaped, and cut (with "...") at
// 80 characters so that a hostile megabyte-long input stays a one-line message.
std::string QuoteText(absl::string_view s);

// 'path' whole, control bytes escaped: a cut path is useless in an error.
std::string QuotePath(absl::string_view path);

// One word for POSIX sh: 'it'\''s'. sh turns it back into exactly `s`, whatever
// bytes it holds (only NUL cannot pass through a command line).
std::string ShellQuote(absl::string_view s);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_QUOTE_H_
