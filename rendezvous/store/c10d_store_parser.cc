#include "rendezvous/store/c10d_store_parser.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace drun {
namespace c10d_store {
namespace {

// Opcode tables (spec §3). Index = wire byte.
constexpr Op kV113Ops[] = {Op::kSet,   Op::kCompareSet, Op::kGet,
                           Op::kAdd,   Op::kCheck,      Op::kWait,
                           Op::kGetNumKeys, Op::kWatchKey, Op::kDeleteKey};
constexpr Op kV2Ops[] = {Op::kValidate,  Op::kSet,        Op::kCompareSet, Op::kGet,
                         Op::kAdd,       Op::kCheck,      Op::kWait,       Op::kGetNumKeys,
                         Op::kDeleteKey, Op::kAppend,     Op::kMultiGet,   Op::kMultiSet,
                         Op::kCancelWait, Op::kPing,      Op::kQueuePush,  Op::kQueuePop,
                         Op::kQueueLen,  Op::kListKeys,   Op::kBarrier};

// Spare capacity a finished key or value may keep (OnStringDone).
constexpr size_t kMaxStringSlack = 64 * 1024;

}  // namespace

const char* OpName(Op op) {
  switch (op) {
    case Op::kValidate: return "VALIDATE";
    case Op::kSet: return "SET";
    case Op::kCompareSet: return "COMPARE_SET";
    case Op::kGet: return "GET";
    case Op::kAdd: return "ADD";
    case Op::kCheck: return "CHECK";
    case Op::kWait: return "WAIT";
    case Op::kGetNumKeys: return "GETNUMKEYS";
    case Op::kWatchKey: return "WATCH_KEY";
    case Op::kDeleteKey: return "DELETE_KEY";
    case Op::kAppend: return "APPEND";
    case Op::kMultiGet: return "MULTI_GET";
    case Op::kMultiSet: return "MULTI_SET";
    case Op::kCancelWait: return "CANCEL_WAIT";
    case Op::kPing: return "PING";
    case Op::kQueuePush: return "QUEUE_PUSH";
    case Op::kQueuePop: return "QUEUE_POP";
    case Op::kQueueLen: return "QUEUE_LEN";
    case Op::kListKeys: return "LIST_KEYS";
    case Op::kBarrier: return "BARRIER";
  }
  return "?";
}

ParserLimits LimitsForMemory(uint64_t physical_memory_bytes) {
  ParserLimits limits;
  const uint64_t quarter = physical_memory_bytes / 4;
  limits.max_value_bytes = std::max(limits.max_value_bytes, quarter);
  limits.max_request_bytes = std::max(limits.max_request_bytes, quarter);
  return limits;
}

int WireOpcode(Dialect dialect, Op op) {
  if (dialect == Dialect::kV113) {
    for (size_t i = 0; i < sizeof(kV113Ops) / sizeof(kV113Ops[0]); ++i)
      if (kV113Ops[i] == op) return static_cast<int>(i);
  } else if (dialect == Dialect::kV2) {
    for (size_t i = 0; i < sizeof(kV2Ops) / sizeof(kV2Ops[0]); ++i)
      if (kV2Ops[i] == op) return static_cast<int>(i);
  }
  return -1;
}

// Grammar of each request (set up in OnOpcode): `plan` fields are read once, then `group`
// fields are repeated as many times as the count read by the plan's last field.
#define DRUN_FIELDS(...) \
  static constexpr C10dStoreParser::Field kArr[] = {__VA_ARGS__, C10dStoreParser::Field::kNone}

C10dStoreParser::C10dStoreParser(ParserLimits limits) : limits_(limits) {}

absl::Status C10dStoreParser::Fail(absl::Status status) {
  phase_ = Phase::kError;
  error_ = status;
  str_ = nullptr;
  return status;
}

absl::Status C10dStoreParser::Feed(absl::string_view data, std::vector<Request>* out) {
  if (phase_ == Phase::kError) return error_;
  consumed_ += data.size();
  const char* p = data.data();
  size_t n = data.size();
  if (phase_ == Phase::kDetect) {
    while (n > 0 && phase_ == Phase::kDetect) {
      const uint8_t b = static_cast<uint8_t>(*p);
      prefix_[prefix_len_] = b;
      ++prefix_len_;
      ++p;
      --n;
      if (b != kValidatePrefix[prefix_len_ - 1]) {
        // Not the 2.x handshake: a 1.13 client. Replay what was held back.
        dialect_ = Dialect::kV113;
        phase_ = Phase::kOpcode;
        std::array<uint8_t, 5> held = prefix_;
        const size_t held_len = prefix_len_;
        prefix_len_ = 0;
        absl::Status s =
            FeedDecided(reinterpret_cast<const char*>(held.data()), held_len, out);
        if (!s.ok()) return s;
      } else if (prefix_len_ == kValidatePrefix.size()) {
        dialect_ = Dialect::kV2;
        phase_ = Phase::kOpcode;
        prefix_len_ = 0;
        Request validate;
        validate.op = Op::kValidate;
        validate.nonce = kValidateMagic;
        out->push_back(std::move(validate));
        ++requests_;
      }
    }
    if (n == 0) return absl::OkStatus();
  }
  return FeedDecided(p, n, out);
}

absl::Status C10dStoreParser::FeedDecided(const char* p, size_t n,
                                          std::vector<Request>* out) {
  while (n > 0) {
    switch (phase_) {
      case Phase::kOpcode: {
        absl::Status s = OnOpcode(static_cast<uint8_t>(*p), out);
        ++p;
        --n;
        if (!s.ok()) return s;
        break;
      }
      case Phase::kFixed: {
        const size_t take = std::min<size_t>(n, fixed_need_ - fixed_have_);
        std::memcpy(fixed_.data() + fixed_have_, p, take);
        fixed_have_ += static_cast<uint8_t>(take);
        p += take;
        n -= take;
        if (fixed_have_ == fixed_need_) {
          absl::Status s = OnFixed(out);
          if (!s.ok()) return s;
        }
        break;
      }
      case Phase::kStringBody: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(n, str_left_));
        str_->append(p, take);
        str_left_ -= take;
        p += take;
        n -= take;
        if (str_left_ == 0) {
          absl::Status s = OnStringDone(out);
          if (!s.ok()) return s;
        }
        break;
      }
      case Phase::kError:
        return error_;
      case Phase::kDetect:
        return Fail(absl::InternalError("c10d parser: detection phase in FeedDecided"));
    }
  }
  return absl::OkStatus();
}

absl::Status C10dStoreParser::OnOpcode(uint8_t byte, std::vector<Request>* out) {
  Op op;
  if (dialect_ == Dialect::kV113) {
    if (byte >= sizeof(kV113Ops) / sizeof(kV113Ops[0]))
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("unknown torch 1.13 store opcode ", static_cast<int>(byte))));
    op = kV113Ops[byte];
  } else {
    if (byte >= sizeof(kV2Ops) / sizeof(kV2Ops[0]))
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("unknown torch 2.x store opcode ", static_cast<int>(byte))));
    op = kV2Ops[byte];
    if (op == Op::kValidate)
      return Fail(absl::InvalidArgumentError("VALIDATE after the first message"));
  }
  req_ = Request();
  req_.op = op;
  request_bytes_ = 0;
  count_ = 0;
  plan_pos_ = 0;
  group_pos_ = 0;
  group_ = nullptr;
  switch (op) {
    case Op::kValidate:
    case Op::kPing: {
      DRUN_FIELDS(Field::kU32);
      plan_ = kArr;
      break;
    }
    case Op::kSet:
    case Op::kAppend:
    case Op::kQueuePush: {
      DRUN_FIELDS(Field::kKey, Field::kValue);
      plan_ = kArr;
      break;
    }
    case Op::kCompareSet: {
      DRUN_FIELDS(Field::kKey, Field::kValue, Field::kValue);
      plan_ = kArr;
      break;
    }
    case Op::kGet:
    case Op::kWatchKey:
    case Op::kDeleteKey:
    case Op::kQueuePop:
    case Op::kQueueLen: {
      DRUN_FIELDS(Field::kKey);
      plan_ = kArr;
      break;
    }
    case Op::kAdd: {
      DRUN_FIELDS(Field::kKey, Field::kI64);
      plan_ = kArr;
      break;
    }
    case Op::kBarrier: {
      DRUN_FIELDS(Field::kKey, Field::kWorldSize);
      plan_ = kArr;
      break;
    }
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet: {
      DRUN_FIELDS(Field::kCount);
      static constexpr Field kGroup[] = {Field::kKey, Field::kNone};
      plan_ = kArr;
      group_ = kGroup;
      break;
    }
    case Op::kMultiSet: {
      DRUN_FIELDS(Field::kPairCount);
      static constexpr Field kGroup[] = {Field::kKey, Field::kValue, Field::kNone};
      plan_ = kArr;
      group_ = kGroup;
      break;
    }
    case Op::kGetNumKeys:
    case Op::kCancelWait:
    case Op::kListKeys: {
      static constexpr Field kArr[] = {Field::kNone};
      plan_ = kArr;
      break;
    }
  }
  return Advance(out);
}

absl::Status C10dStoreParser::StartFixed(size_t n) {
  phase_ = Phase::kFixed;
  fixed_need_ = static_cast<uint8_t>(n);
  fixed_have_ = 0;
  return absl::OkStatus();
}

absl::Status C10dStoreParser::Advance(std::vector<Request>* out) {
  for (;;) {
    Field next = plan_[plan_pos_];
    if (next != Field::kNone) {
      ++plan_pos_;
    } else if (group_ != nullptr && count_ > 0) {
      next = group_[group_pos_];
      if (next == Field::kNone) {
        group_pos_ = 0;
        --count_;
        continue;
      }
      ++group_pos_;
    } else {
      Emit(out);
      return absl::OkStatus();
    }
    field_ = next;
    switch (next) {
      case Field::kKey:
      case Field::kValue:
        reading_len_ = true;
        return StartFixed(8);
      case Field::kI64:
      case Field::kWorldSize:
      case Field::kCount:
      case Field::kPairCount:
        return StartFixed(8);
      case Field::kU32:
        return StartFixed(4);
      case Field::kNone:
        break;
    }
  }
}

absl::Status C10dStoreParser::OnFixed(std::vector<Request>* out) {
  // Integers travel in the client's host byte order (spec §1); clients are little-endian
  // x86-64/aarch64 machines like this server, so a plain copy decodes them.
  uint64_t u64 = 0;
  uint32_t u32 = 0;
  if (fixed_need_ == 8) std::memcpy(&u64, fixed_.data(), 8);
  if (fixed_need_ == 4) std::memcpy(&u32, fixed_.data(), 4);
  switch (field_) {
    case Field::kKey:
    case Field::kValue: {
      const bool is_key = field_ == Field::kKey;
      const uint64_t limit = is_key ? limits_.max_key_bytes : limits_.max_value_bytes;
      if (u64 > limit)
        return Fail(absl::ResourceExhaustedError(
            absl::StrCat(OpName(req_.op), ": ", is_key ? "key" : "value", " of ", u64,
                         " bytes exceeds the limit of ", limit)));
      request_bytes_ += u64;
      if (request_bytes_ > limits_.max_request_bytes)
        return Fail(absl::ResourceExhaustedError(
            absl::StrCat(OpName(req_.op), ": request of more than ",
                         limits_.max_request_bytes, " bytes")));
      std::vector<std::string>& dst = is_key ? req_.keys : req_.values;
      dst.emplace_back();
      reading_len_ = false;
      if (u64 == 0) return OnStringDone(out);
      str_ = &dst.back();
      str_left_ = u64;
      phase_ = Phase::kStringBody;
      return absl::OkStatus();
    }
    case Field::kI64:
      req_.delta = static_cast<int64_t>(u64);
      return Advance(out);
    case Field::kWorldSize:
      req_.world_size = static_cast<int64_t>(u64);
      return Advance(out);
    case Field::kU32:
      req_.nonce = u32;
      return Advance(out);
    case Field::kCount:
    case Field::kPairCount:
      // MULTI_SET's count is an int64 on the wire; a negative one reads as huge here.
      if (u64 > limits_.max_key_count)
        return Fail(absl::ResourceExhaustedError(
            absl::StrCat(OpName(req_.op), ": ", static_cast<int64_t>(u64),
                         " keys exceeds the limit of ", limits_.max_key_count)));
      count_ = u64;
      group_pos_ = 0;
      return Advance(out);
    case Field::kNone:
      break;
  }
  return Fail(absl::InternalError("c10d parser: fixed field without a kind"));
}

absl::Status C10dStoreParser::OnStringDone(std::vector<Request>* out) {
  // append() doubles, so a big value ends with up to as much spare capacity as it holds (a
  // 65 MiB value in a 128 MiB buffer), and it is kept that way in the store: give it back.
  if (str_ != nullptr && str_->capacity() - str_->size() > kMaxStringSlack)
    str_->shrink_to_fit();
  str_ = nullptr;
  return Advance(out);
}

void C10dStoreParser::Emit(std::vector<Request>* out) {
  out->push_back(std::move(req_));
  req_ = Request();
  phase_ = Phase::kOpcode;
  field_ = Field::kNone;
  ++requests_;
}

#undef DRUN_FIELDS

}  // namespace c10d_store
}  // namespace drun
