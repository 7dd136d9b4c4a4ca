#include "launcher/job/config_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "launcher/job/cli.h"
#include "rendezvous/base/read_file.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/yaml.h"

namespace drun {
namespace {

constexpr size_t kMaxJobFileBytes = 16 << 20;

// The keys that are not command-line options.
constexpr const char kEnv[] = "env";
constexpr const char kTls[] = "tls";
constexpr const char kHosts[] = "hosts";
constexpr const char kScript[] = "script";
constexpr const char kArgs[] = "args";

// Whether an option's value is a number (its rule in the option table, cli.h).
bool IsNumber(const OptionInfo& o) {
  return o.rule.type == ValueRule::kInt || o.rule.type == ValueRule::kSeconds;
}

// User text in messages: control bytes escaped, cut at 80 characters.
std::string Quote(absl::string_view s) {
  constexpr size_t kMax = 80;
  size_t n = std::min(s.size(), kMax);
  while (absl::CHexEscape(s.substr(0, n)).size() > kMax) --n;
  return absl::StrCat("'", absl::CHexEscape(s.substr(0, n)), n < s.size() ? "...'" : "'");
}

bool NeedsQuotes(const std::string& s);  // below, with the job file writer

// One item of a YAML flow list ([a, b]) that reads back as exactly `s`: plain when it can
// be, else single-quoted; double-quoted with \xNN escapes when it holds control bytes
// (which a message must not carry raw, and single quotes cannot express).
std::string FlowItem(const std::string& s) {
  if (!NeedsQuotes(s) && s.find_first_of(",[]{}:#") == std::string::npos) return s;
  const bool control = std::any_of(s.begin(), s.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (!control) return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "''"}}), "'");
  std::string out = "\"";
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      absl::StrAppend(&out, "\\", std::string(1, c));
    } else if (u < 0x20 || u == 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// `args: --epochs 5` meant two arguments, not one with a space: the list to write instead,
// split at whitespace. Cut to about 80 characters (a long word at a UTF-8 character
// boundary), with "..." where it was cut.
std::string ArgsListFor(absl::string_view text) {
  constexpr size_t kMax = 80;
  std::vector<std::string> items;
  size_t size = 0;
  for (absl::string_view word :
       absl::StrSplit(text, absl::ByAnyChar(" \t\n\r\f\v"), absl::SkipEmpty())) {
    if (size + word.size() > kMax) {
      if (items.empty()) {
        size_t n = kMax;
        while (n > 0 && (static_cast<unsigned char>(word[n]) & 0xC0) == 0x80) --n;
        items.push_back(FlowItem(std::string(word.substr(0, n))) + "...");
      } else {
        items.push_back("...");
      }
      break;
    }
    items.push_back(FlowItem(std::string(word)));
    size += word.size() + 2;
  }
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

std::string Canonical(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

// What a node is, for "must be X, not <this>".
std::string Describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Scalar:
      return Quote(n.Scalar());
    default:
      return "empty";
  }
}

std::string Suggest(const std::string& key, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = std::min<size_t>(4, key.size() / 2 + 1);
  const std::string lower = absl::AsciiStrToLower(Canonical(key));
  for (const auto& k : known) {
    size_t d = EditDistance(lower, k);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

bool IsEnvName(absl::string_view s) {
  if (s.empty() || absl::ascii_isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

bool IsHostChar(char c, bool allow_colon) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ||
         (allow_colon && c == ':');
}

// Host entries in host-file syntax, the one text form that carries max_slots.
std::string HostfileLine(const HostEntry& e) {
  std::string line = e.user.empty() ? e.host : absl::StrCat(e.user, "@", e.host);
  if (e.slots > 0) absl::StrAppend(&line, " slots=", e.slots);
  if (e.max_slots > 0) absl::StrAppend(&line, " max_slots=", e.max_slots);
  return line;
}

// The -H form of an entry (max_slots has no -H spelling).
std::string HostArg(const HostEntry& e) {
  std::string s = e.user.empty() ? "" : absl::StrCat(e.user, "@");
  const bool ipv6 = e.host.find(':') != std::string::npos;
  if (e.slots > 0) {
    absl::StrAppend(&s, ipv6 ? absl::StrCat("[", e.host, "]") : e.host, ":", e.slots);
  } else {
    absl::StrAppend(&s, e.host);
  }
  return s;
}

class Parser {
 public:
  explicit Parser(absl::string_view filename) : file_(filename) {}

  absl::StatusOr<JobFile> Parse(const YAML::Node& root);

  absl::Status Error(const YAML::Node& at, absl::string_view msg) const {
    YAML::Mark m = at.Mark();
    return ErrorAt(m.is_null() ? 0 : m.line + 1, msg);
  }
  absl::Status ErrorAt(int line, absl::string_view msg) const {
    if (line <= 0) return absl::InvalidArgumentError(absl::StrCat(file_, ": ", msg));
    return absl::InvalidArgumentError(absl::StrCat(file_, ":", line, ": ", msg));
  }

 private:
  static int Line(const YAML::Node& n) {
    YAML::Mark m = n.Mark();
    return m.is_null() ? 0 : m.line + 1;
  }

  absl::Status Option(const OptionInfo& o, const YAML::Node& key, const YAML::Node& v);
  absl::Status Scalar(const std::string& name, bool number, const YAML::Node& key, const YAML::Node& v,
                      std::string* out);
  absl::Status Env(const YAML::Node& key, const YAML::Node& v);
  absl::Status Tls(const YAML::Node& key, const YAML::Node& v);
  struct Seen {
    std::string spelling;
    int line;
  };
  absl::Status Entry(const std::vector<OptionInfo>& options, const std::string& key,
                     const YAML::Node& k, const YAML::Node& v);
  absl::Status OneWayToNameHosts(const std::map<std::string, Seen>& seen);
  absl::Status Flag(const std::string& name, const YAML::Node& key, const YAML::Node& v);
  absl::Status Repeated(const std::string& name, const YAML::Node& key, const YAML::Node& v);
  absl::Status ConfMap(const YAML::Node& v);
  absl::Status Number(const OptionInfo& o, const YAML::Node& key, std::string* s);
  absl::Status Hosts(const YAML::Node& key, const YAML::Node& v);
  absl::Status HostLines(const YAML::Node& key, const YAML::Node& v, std::vector<HostLine>* lines);
  absl::Status HostString(const YAML::Node& item, std::vector<HostLine>* lines);
  absl::Status HostMap(const YAML::Node& item, std::vector<HostLine>* lines);
  absl::Status HostKeyNames(const YAML::Node& item);
  absl::Status HostKey(const YAML::Node& k, const YAML::Node& val, HostEntry* e);
  // A host-file line that came from `at`: messages about it start "<file>:<line>: hosts".
  HostLine HostLineAt(const YAML::Node& at, std::string text) const {
    const int line = Line(at);
    return {std::move(text),
            line > 0 ? absl::StrCat(file_, ":", line, ": hosts") : absl::StrCat(file_, ": hosts"),
            line};
  }
  absl::Status Args(const YAML::Node& key, const YAML::Node& v);

  std::string file_;
  JobFile job_;
};

// A scalar value for key `name`; the error for anything else says what was found.
absl::Status Parser::Scalar(const std::string& name, bool number, const YAML::Node& key, const YAML::Node& v,
                            std::string* out) {
  if (v.IsNull()) {
    return Error(key, absl::StrCat("'", name, "' has no value; give one, or delete the line"));
  }
  if (!v.IsScalar()) {
    return Error(key, absl::StrCat("'", name, "' must be ", number ? "a number" : "a string", ", not ",
                                   Describe(v)));
  }
  *out = v.Scalar();
  return absl::OkStatus();
}

absl::Status Parser::Option(const OptionInfo& o, const YAML::Node& key, const YAML::Node& v) {
  if (o.is_flag) return Flag(o.name, key, v);
  if (o.repeatable) return Repeated(o.name, key, v);
  if (o.id == Opt::kRdzvTls && v.IsMap()) return Tls(key, v);
  if (o.id == Opt::kRdzvConf && v.IsMap()) return ConfMap(v);
  std::string s;
  if (absl::Status st = Scalar(o.yaml_key, IsNumber(o), key, v, &s); !st.ok()) return st;
  if (absl::Status st = Number(o, key, &s); !st.ok()) return st;
  job_.options[o.name] = s;
  return absl::OkStatus();
}

absl::Status Parser::Flag(const std::string& name, const YAML::Node& key, const YAML::Node& v) {
  bool b;
  if (v.IsNull()) {
    return Error(key, absl::StrCat("'", name, "' has no value; write true or false"));
  }
  if (!v.IsScalar() || !YAML::convert<bool>::decode(v, b)) {
    return Error(key, absl::StrCat("'", name, "' must be true or false, not ", Describe(v)));
  }
  job_.options[name] = b ? "1" : "0";
  return absl::OkStatus();
}

absl::Status Parser::Repeated(const std::string& name, const YAML::Node& key, const YAML::Node& v) {
  std::vector<std::string>& values = job_.multi[name];
  if (!v.IsSequence()) {
    std::string s;
    if (absl::Status st = Scalar(name, false, key, v, &s); !st.ok()) return st;
    values.push_back(s);
    return absl::OkStatus();
  }
  int index = 0;
  for (const auto& item : v) {
    ++index;
    if (item.IsNull()) {
      return Error(key, absl::StrCat("'", name, "' item ", index, " is empty"));
    }
    if (!item.IsScalar()) {
      return Error(item, absl::StrCat("'", name, "' items must be strings, not ", Describe(item)));
    }
    values.push_back(item.Scalar());
  }
  return absl::OkStatus();
}

// rdzv-conf as a map: KEY: VALUE entries, kept as the flag's "k=v,k=v".
absl::Status Parser::ConfMap(const YAML::Node& v) {
  std::vector<std::string> items;
  for (const auto& kv : v) {
    if (!kv.first.IsScalar() || !kv.second.IsScalar()) {
      return Error(kv.first,
                   "'rdzv-conf' entries must be KEY: VALUE with plain values, e.g. "
                   "join_timeout: 600");
    }
    const std::string& k = kv.first.Scalar();
    const std::string& val = kv.second.Scalar();
    if (k.empty() || absl::StrContains(k, '=') || absl::StrContains(k, ',') ||
        absl::StrContains(val, ',')) {
      return Error(kv.first, absl::StrCat("'rdzv-conf' entry ", Quote(k),
                                          ": write KEY: VALUE with no ',' in either and no "
                                          "'=' in the key"));
    }
    items.push_back(absl::StrCat(k, "=", val));
  }
  job_.options[OptionOf(Opt::kRdzvConf).name] = absl::StrJoin(items, ",");
  return absl::OkStatus();
}

// An option's scalar *s, checked by its rule (the same check, and the same
// words, as on the command line: CheckValue) and trimmed.
absl::Status Parser::Number(const OptionInfo& o, const YAML::Node& key, std::string* s) {
  if (!IsNumber(o)) return absl::OkStatus();
  if (absl::Status st = CheckValue(o.rule, *s); !st.ok()) {
    return Error(key, absl::StrCat("'", o.yaml_key, "' ", st.message()));
  }
  *s = std::string(absl::StripAsciiWhitespace(*s));
  return absl::OkStatus();
}

// tls: {cert: FILE, key: FILE, ca: FILE} -> --rdzv-tls CERT,KEY,CA.
absl::Status Parser::Tls(const YAML::Node& key, const YAML::Node& v) {
  std::map<std::string, std::string> files;
  for (const auto& kv : v) {
    const std::string k = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if ((k != "cert" && k != "key" && k != "ca") || !kv.second.IsScalar() ||
        absl::StrContains(kv.second.Scalar(), ',')) {
      return Error(kv.first, "'tls' takes cert: FILE, key: FILE and ca: FILE (paths without ',')");
    }
    files[k] = kv.second.Scalar();
  }
  if (files.size() != 3) return Error(key, "'tls' needs all three of cert:, key: and ca:");
  job_.options[OptionOf(Opt::kRdzvTls).name] = absl::StrCat(files["cert"], ",", files["key"], ",", files["ca"]);
  return absl::OkStatus();
}

absl::Status Parser::Env(const YAML::Node& key, const YAML::Node& v) {
  if (!v.IsMap()) {
    return Error(key, absl::StrCat("'env' must be a map of VAR: value, not ", Describe(v)));
  }
  for (const auto& kv : v) {
    if (!kv.first.IsScalar() || !IsEnvName(kv.first.Scalar())) {
      return Error(kv.first, absl::StrCat("env: ", Describe(kv.first),
                                          " is not a variable name (letters, digits, '_'; not "
                                          "starting with a digit)"));
    }
    const std::string& var = kv.first.Scalar();
    if (job_.env.count(var)) {
      return Error(kv.first, absl::StrCat("env: ", var, " is set twice"));
    }
    if (kv.second.IsNull()) {
      return Error(kv.first, absl::StrCat("env: ", var, " has no value; write ", var,
                                          ": \"\" for an empty one, or list it under 'x' to "
                                          "forward the launcher's value"));
    }
    if (!kv.second.IsScalar()) {
      return Error(kv.first,
                   absl::StrCat("env: ", var, " must be a string, not ", Describe(kv.second)));
    }
    job_.env[var] = kv.second.Scalar();
  }
  return absl::OkStatus();
}

// "node3:2,bob@node4": host-file lines from one --host style string.
absl::Status Parser::HostString(const YAML::Node& item, std::vector<HostLine>* lines) {
  auto parsed = ParseHostArg(item.Scalar(), "entry");
  if (!parsed.ok()) return Error(item, absl::StrCat("hosts: ", parsed.status().message()));
  if (parsed->empty()) return Error(item, "hosts: empty host entry");
  for (const HostEntry& e : *parsed) lines->push_back(HostLineAt(item, HostfileLine(e)));
  return absl::OkStatus();
}

// One key of a {host, slots, max_slots, user} map into `e`.
absl::Status Parser::HostKey(const YAML::Node& k, const YAML::Node& val, HostEntry* e) {
  const std::string name = k.IsScalar() ? Canonical(k.Scalar()) : "";
  if (!val.IsScalar() || val.Scalar().empty()) {
    return Error(k, absl::StrCat("hosts: '", k.Scalar(), "' must be ",
                                 name == "host" || name == "user" ? "a name" : "a number", ", not ",
                                 Describe(val)));
  }
  const std::string& s = val.Scalar();
  if (name == "host" || name == "user") {
    for (char c : s) {
      if (!IsHostChar(c, name == "host")) {
        return Error(k, absl::StrCat("hosts: invalid ", name, " name ", Quote(s),
                                     " (expected letters, digits, '-', '.', '_'",
                                     name == "host" ? "; slots go in 'slots'" : "", ")"));
      }
    }
    (name == "host" ? e->host : e->user) = s;
    return absl::OkStatus();
  }
  int n;
  if (!absl::SimpleAtoi(s, &n) || n < 1 || n > kMaxHostSlots) {
    return Error(k, absl::StrCat("hosts: '", k.Scalar(), "' must be a whole number from 1 to ",
                                 kMaxHostSlots, ", not ", Describe(val)));
  }
  (name == "slots" ? e->slots : e->max_slots) = n;
  return absl::OkStatus();
}

// Each key of a host map is known and given once.
absl::Status Parser::HostKeyNames(const YAML::Node& item) {
  static const std::vector<std::string> kKeys = {"host", "user", "slots", "max-slots"};
  std::map<std::string, int> seen;
  for (const auto& kv : item) {
    const YAML::Node& k = kv.first;
    const std::string name = k.IsScalar() ? Canonical(k.Scalar()) : "";
    if (std::find(kKeys.begin(), kKeys.end(), name) == kKeys.end()) {
      std::string hint = k.IsScalar() ? Suggest(k.Scalar(), kKeys) : "";
      if (hint == "max-slots") hint = "max_slots";
      return Error(k, absl::StrCat("hosts: unknown key ", Describe(k),
                                   hint.empty() ? "; a host is {host, slots, max_slots, user}"
                                                : absl::StrCat("; did you mean '", hint, "'?")));
    }
    if (!seen.emplace(name, Line(k)).second) {
      return Error(k, absl::StrCat("hosts: '", k.Scalar(), "' is given twice for one host"));
    }
  }
  return absl::OkStatus();
}

// {host: node3, slots: 2, user: bob}: one host-file line.
absl::Status Parser::HostMap(const YAML::Node& item, std::vector<HostLine>* lines) {
  if (absl::Status st = HostKeyNames(item); !st.ok()) return st;
  HostEntry e;
  for (const auto& kv : item) {
    if (absl::Status st = HostKey(kv.first, kv.second, &e); !st.ok()) return st;
  }
  if (e.host.empty()) return Error(item, "hosts: this entry has no 'host'");
  if (e.host.find(':') != std::string::npos) {
    // Only an IPv6 address may hold ':'; ParseHostArg knows which those are.
    auto parsed = ParseHostArg(e.host);
    if (!parsed.ok() || parsed->size() != 1 || parsed->front().host != e.host) {
      return Error(item, absl::StrCat("hosts: invalid host name ", Quote(e.host),
                                      " (':' only belongs in an IPv6 address; slots go in "
                                      "'slots')"));
    }
  }
  if (e.max_slots > 0 && e.slots > e.max_slots) {
    return Error(item, absl::StrCat("hosts: max_slots=", e.max_slots, " is less than slots=",
                                    e.slots, " for ", e.host));
  }
  lines->push_back(HostLineAt(item, HostfileLine(e)));
  return absl::OkStatus();
}

// The host-file lines of a hosts: value (one string, or a list of strings and maps).
absl::Status Parser::HostLines(const YAML::Node& key, const YAML::Node& v,
                               std::vector<HostLine>* lines) {
  if (v.IsScalar()) return HostString(v, lines);
  if (!v.IsSequence()) {
    return Error(key, absl::StrCat("'hosts' must be a list of hosts, not ", Describe(v)));
  }
  int index = 0;
  for (const auto& item : v) {
    ++index;
    absl::Status st;
    if (item.IsNull()) {
      st = Error(key, absl::StrCat("hosts: item ", index, " is empty"));
    } else if (item.IsScalar()) {
      st = HostString(item, lines);
    } else if (item.IsMap()) {
      st = HostMap(item, lines);
    } else {
      st = Error(item, absl::StrCat("hosts: an entry must be 'host[:slots]' or a map "
                                    "{host, slots, max_slots, user}, not ",
                                    Describe(item)));
    }
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status Parser::Hosts(const YAML::Node& key, const YAML::Node& v) {
  std::vector<HostLine> lines;
  if (absl::Status st = HostLines(key, v, &lines); !st.ok()) return st;
  if (lines.empty()) return Error(key, "'hosts' is empty; list at least one host");
  // Repeated hosts merge exactly as in a host file: one parser, one set of rules.
  auto merged = ParseHostLines(lines);
  if (!merged.ok()) return merged.status();
  for (const HostEntry& e : *merged) job_.hosts.push_back(HostArg(e));
  job_.host_entries = std::move(*merged);
  return absl::OkStatus();
}

absl::Status Parser::Args(const YAML::Node& key, const YAML::Node& v) {
  if (v.IsScalar()) {
    return Error(key, absl::StrCat("'args' must be a list, one item per argument, not a string; "
                                   "write args: ", ArgsListFor(v.Scalar()), " or one item per line"));
  }
  if (!v.IsSequence()) {
    return Error(key, absl::StrCat("'args' must be a list of strings, not ", Describe(v)));
  }
  int index = 0;
  for (const auto& item : v) {
    ++index;
    if (item.IsNull()) {
      // An empty node's mark is the next token's, maybe lines later: name the item instead.
      return Error(key, absl::StrCat("args: item ", index,
                                     " is empty; write '' for an empty "
                                     "argument"));
    }
    if (!item.IsScalar()) {
      return Error(item, absl::StrCat("args: items must be strings, not ", Describe(item)));
    }
    job_.args.push_back(item.Scalar());
  }
  return absl::OkStatus();
}

absl::StatusOr<JobFile> Parser::Parse(const YAML::Node& root) {
  if (root.IsNull()) return job_;
  if (!root.IsMap()) {
    return Error(
        root, absl::StrCat("a job file is a map of settings (key: value), not ", Describe(root)));
  }
  const std::vector<OptionInfo> options = KnownOptions();
  std::map<std::string, Seen> seen;  // canonical key -> first appearance
  for (const auto& kv : root) {
    const YAML::Node& k = kv.first;
    if (!k.IsScalar()) {
      return Error(
          k, absl::StrCat("keys are setting names such as nproc-per-node, not ", Describe(k)));
    }
    const std::string& raw = k.Scalar();
    // tls: {cert, key, ca} is --rdzv-tls's job-file spelling.
    const std::string key = Canonical(raw) == kTls ? OptionOf(Opt::kRdzvTls).yaml_key : Canonical(raw);
    const auto [it, fresh] = seen.emplace(key, Seen{raw, Line(k)});
    if (!fresh) {
      return Error(k, absl::StrCat("'", raw, "' is set twice (also as '", it->second.spelling,
                                   "' on line ", it->second.line, ")"));
    }
    if (absl::Status st = Entry(options, key, k, kv.second); !st.ok()) return st;
  }
  if (absl::Status st = OneWayToNameHosts(seen); !st.ok()) return st;
  return std::move(job_);
}

absl::Status Parser::Entry(const std::vector<OptionInfo>& options, const std::string& key,
                           const YAML::Node& k, const YAML::Node& v) {
  if (key == kEnv) return Env(k, v);
  if (key == kHosts) return Hosts(k, v);
  if (key == kArgs) return Args(k, v);
  if (key == kScript) {
    absl::Status st = Scalar(kScript, false, k, v, &job_.script);
    if (st.ok() && job_.script.empty()) st = Error(k, "'script' is empty");
    return st;
  }
  const std::string& raw = k.Scalar();
  auto o = std::find_if(options.begin(), options.end(),
                        [&](const OptionInfo& x) { return !x.yaml_key.empty() && x.yaml_key == key; });
  if (o != options.end()) return Option(*o, k, v);
  if (const OptionInfo* cmd = FindOption(key); cmd && cmd->yaml_key.empty()) {
    return Error(k, absl::StrCat("'", raw, "' belongs on the command line, not in a job file"));
  }
  std::vector<std::string> known = {kEnv, kHosts, kScript, kArgs, kTls};
  for (const auto& x : options) {
    if (!x.yaml_key.empty()) known.push_back(x.yaml_key);
  }
  const std::string hint = Suggest(raw, known);
  return Error(k, absl::StrCat("unknown key ", Quote(raw),
                               hint.empty() ? "; the keys are drun's options (drun --help) and "
                                              "env, hosts, script, args"
                                            : absl::StrCat("; did you mean '", hint, "'?")));
}

// The three ways of naming hosts exclude each other, as on the command line.
absl::Status Parser::OneWayToNameHosts(const std::map<std::string, Seen>& seen) {
  std::vector<const Seen*> named;
  for (const std::string& name : {OptionOf(Opt::kHostfile).yaml_key, OptionOf(Opt::kHost).yaml_key,
                                  std::string(kHosts)}) {
    if (auto it = seen.find(name); it != seen.end()) named.push_back(&it->second);
  }
  std::sort(named.begin(), named.end(),
            [](const Seen* a, const Seen* b) { return a->line < b->line; });
  if (named.size() > 1) {
    return ErrorAt(named[1]->line,
                   absl::StrCat("'", named[1]->spelling, "' and '", named[0]->spelling, "' (line ",
                                named[0]->line, ") both name the hosts; keep one"));
  }
  return absl::OkStatus();
}

// YAML plain scalars that read back as something other than the same string (or that a
// reader would take for a boolean): these are written double-quoted.
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  static const char* const kSpecial[] = {"~",  "null", "true", "false", "yes",
                                         "no", "on",   "off",  "y",     "n"};
  const std::string lower = absl::AsciiStrToLower(s);
  for (const char* w : kSpecial) {
    if (lower == w) return true;
  }
  const unsigned char c0 = static_cast<unsigned char>(s[0]);
  const bool dash_start = s[0] == '-' && s.size() > 1 && s != "---" && s[1] != ' ';
  if (!absl::ascii_isalnum(c0) && !dash_start && s[0] != '/' && s[0] != '.' && s[0] != '_') {
    return true;
  }
  if (s.back() == ':' || s.back() == ' ') return true;
  if (absl::StrContains(s, ": ") || absl::StrContains(s, " #")) return true;
  // YAML 1.1 readers (PyYAML) take 2:4 for the base-60 number 124.
  if (absl::StrContains(s, ':') && s.find_first_not_of("0123456789:") == std::string::npos) {
    return true;
  }
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        !absl::StrContains("-_./@%+:=, ", c)) {
      return true;
    }
  }
  return false;
}

void EmitString(YAML::Emitter& out, const std::string& s) {
  if (NeedsQuotes(s)) {
    out << YAML::DoubleQuoted << s;
  } else {
    out << s;
  }
}

// "k=v,k2=v2" as a map, when it is one.
bool SplitConf(const std::string& v, std::vector<std::pair<std::string, std::string>>* out) {
  for (absl::string_view item : absl::StrSplit(v, ',', absl::SkipEmpty())) {
    const size_t eq = item.find('=');
    if (eq == 0 || eq == absl::string_view::npos) return false;
    out->emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
  }
  return !out->empty();
}

// Where each document of a YAML stream starts (the mark of its first node).
// yaml-cpp 0.7's LoadAll never returns on some malformed streams: a ',' where
// a document should start yields empty documents forever without being
// consumed. So the documents are counted, with a bound, before one is loaded.
class DocumentMarks : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> marks;
  void OnDocumentStart(const YAML::Mark&) override { first_ = true; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { Node(m); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { Node(m); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override { Node(m); }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Node(m);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Node(m);
  }
  void OnMapEnd() override {}

 private:
  void Node(const YAML::Mark& m) {
    if (first_) marks.push_back(m);
    first_ = false;
  }
  bool first_ = false;
};

}  // namespace

absl::StatusOr<JobFile> ParseJobFile(absl::string_view yaml_text, absl::string_view filename) {
  Parser parser(filename);
  try {
    const std::string text(yaml_text);
    std::istringstream in(text);
    YAML::Parser stream(in);
    DocumentMarks docs;
    for (int n = 0; n < 2 && stream.HandleNextDocument(docs); ++n) {
    }
    if (docs.marks.size() > 1) {
      const YAML::Mark& m = docs.marks[1];
      if (absl::StartsWith(text, "---") || absl::StrContains(text, "\n---")) {
        return parser.ErrorAt(m.line + 1, "a job file holds one YAML document; remove the second '---'");
      }
      const size_t pos = m.pos >= 0 ? std::min(static_cast<size_t>(m.pos), text.size()) : 0;
      return parser.ErrorAt(m.line + 1, absl::StrCat("not valid YAML: unexpected '",
                                                     absl::CHexEscape(text.substr(pos, 1)), "' (column ",
                                                     m.column + 1, ")"));
    }
    if (docs.marks.empty()) return JobFile{};
    return parser.Parse(YAML::Load(text));
  } catch (const YAML::Exception& e) {
    const int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    std::string msg = absl::StrCat("not valid YAML: ", e.msg);
    if (!e.mark.is_null()) absl::StrAppend(&msg, " (column ", e.mark.column + 1, ")");
    return parser.ErrorAt(line, msg);
  } catch (const std::exception& e) {
    return parser.ErrorAt(0, absl::StrCat("cannot read the job file: ", e.what()));
  }
}

absl::StatusOr<JobFile> LoadJobFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSmallFile(path, kMaxJobFileBytes, "job file");
  if (!text.ok()) return text.status();
  return ParseJobFile(*text, path);
}

namespace {

void EmitStringMap(YAML::Emitter& out, const std::vector<std::pair<std::string, std::string>>& kv) {
  out << YAML::BeginMap;
  for (const auto& [k, v] : kv) {
    out << YAML::Key;
    EmitString(out, k);
    out << YAML::Value;
    EmitString(out, v);
  }
  out << YAML::EndMap;
}

// An option's value in the shape the job file takes it: a flag as a bool,
// --rdzv-tls as a tls: block, --rdzv-conf as a map, anything else a string.
void EmitOptionValue(YAML::Emitter& out, const OptionInfo& o, const std::string& v) {
  std::vector<std::pair<std::string, std::string>> conf;
  if (o.is_flag && (v == "1" || v == "0")) {
    out << (v == "1");
  } else if (o.id == Opt::kRdzvTls && std::count(v.begin(), v.end(), ',') == 2) {
    const std::vector<std::string> files = absl::StrSplit(v, ',');
    EmitStringMap(out, {{"cert", files[0]}, {"key", files[1]}, {"ca", files[2]}});
  } else if (o.id == Opt::kRdzvConf && SplitConf(v, &conf)) {
    EmitStringMap(out, conf);
  } else {
    EmitString(out, v);
  }
}

void EmitOptions(YAML::Emitter& out, const JobFile& job) {
  std::map<std::string, std::string> rest = job.options;
  for (const OptionInfo& o : KnownOptions()) {
    auto it = rest.find(o.name);
    if (it == rest.end()) continue;
    out << YAML::Key << o.yaml_key << YAML::Value;
    EmitOptionValue(out, o, it->second);
    rest.erase(it);
  }
  for (const auto& [name, v] : rest) {
    out << YAML::Key << name << YAML::Value;
    EmitString(out, v);
  }
  for (const auto& [name, values] : job.multi) {
    if (values.empty()) continue;
    out << YAML::Key << name << YAML::Value << YAML::BeginSeq;
    for (const auto& v : values) EmitString(out, v);
    out << YAML::EndSeq;
  }
}

void EmitHostEntry(YAML::Emitter& out, const HostEntry& e) {
  if (e.max_slots == 0) {
    EmitString(out, HostArg(e));
    return;
  }
  out << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "host" << YAML::Value;
  EmitString(out, e.host);
  if (!e.user.empty()) {
    out << YAML::Key << "user" << YAML::Value;
    EmitString(out, e.user);
  }
  if (e.slots > 0) out << YAML::Key << "slots" << YAML::Value << e.slots;
  out << YAML::Key << "max_slots" << YAML::Value << e.max_slots;
  out << YAML::EndMap;
}

void EmitHosts(YAML::Emitter& out, const JobFile& job) {
  if (!job.host_entries.empty()) {
    out << YAML::Key << kHosts << YAML::Value << YAML::BeginSeq;
    for (const HostEntry& e : job.host_entries) EmitHostEntry(out, e);
    out << YAML::EndSeq;
  } else if (!job.hosts.empty()) {
    out << YAML::Key << kHosts << YAML::Value << YAML::BeginSeq;
    for (const auto& h : job.hosts) EmitString(out, h);
    out << YAML::EndSeq;
  }
}

}  // namespace

std::string RenderJobFile(const JobFile& job) {
  if (job.options.empty() && job.multi.empty() && job.env.empty() && job.hosts.empty() &&
      job.host_entries.empty() && job.script.empty() && job.args.empty()) {
    return "{}\n";
  }
  YAML::Emitter out;
  out << YAML::BeginMap;
  EmitOptions(out, job);
  if (!job.env.empty()) {
    out << YAML::Key << kEnv << YAML::Value;
    EmitStringMap(out, {job.env.begin(), job.env.end()});
  }
  EmitHosts(out, job);
  if (!job.script.empty()) {
    out << YAML::Key << kScript << YAML::Value;
    EmitString(out, job.script);
  }
  if (!job.args.empty()) {
    out << YAML::Key << kArgs << YAML::Value << YAML::BeginSeq;
    for (const auto& a : job.args) EmitString(out, a);
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  return absl::StrCat(out.c_str(), "\n");
}

}  // namespace drun
