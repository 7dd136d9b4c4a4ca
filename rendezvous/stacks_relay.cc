#include "rendezvous/stacks_relay.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace drun {
namespace {

v1::ControlReply ErrorReply(const StacksRelay::Member& m, const std::string& error) {
  v1::ControlReply r;
  r.set_host(m.host);
  r.set_node_rank(m.node_rank);
  r.set_error(error);
  return r;
}

}  // namespace

std::vector<StacksRelay::Ask> StacksRelay::Start(Asker asker, std::vector<Member> members,
                                                 TimePoint now) {
  const uint64_t id = ++next_id_;
  std::vector<Ask> asks;
  for (const Member& m : members) asks.push_back({m.node, id});
  pending_[id] = Pending{asker, now + kTimeout, std::move(members), {}};
  return asks;
}

void StacksRelay::OnReply(NodeId node, uint64_t id, v1::ControlReply reply) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  Pending& p = it->second;
  for (const Member& m : p.members) {
    if (m.node != node) continue;
    reply.set_node_rank(m.node_rank);
    if (reply.host().empty()) reply.set_host(m.host);
    p.replies.emplace(node, std::move(reply));  // a repeat keeps the first
    return;
  }
}

void StacksRelay::OnLost(NodeId node) {
  for (auto& [id, p] : pending_) {
    for (const Member& m : p.members) {
      if (m.node == node) p.replies.emplace(node, ErrorReply(m, "its agent was lost before it answered"));
    }
  }
}

std::optional<TimePoint> StacksRelay::NextDeadline() const {
  std::optional<TimePoint> next;
  for (const auto& [id, p] : pending_) {
    if (!next || p.deadline < *next) next = p.deadline;
  }
  return next;
}

void StacksRelay::CapDump(v1::ControlReply* reply, size_t budget) {
  std::string* dump = reply->mutable_dump();
  if (dump->size() <= budget) return;
  const size_t cut_at = dump->rfind('\n', budget);
  const size_t keep = cut_at == std::string::npos ? 0 : cut_at + 1;
  const size_t cut = dump->size() - keep;
  dump->resize(keep);
  absl::StrAppend(dump, "[", cut, " more bytes not sent",
                  reply->dump_file().empty() ? "" : absl::StrCat("; the whole dump is in ", reply->dump_file()),
                  "]\n");
}

StacksRelay::Done StacksRelay::Complete(Pending& p) {
  Done d;
  d.asker = p.asker;
  for (const Member& m : p.members) {
    auto r = p.replies.find(m.node);
    d.nodes.push_back(r != p.replies.end()
                          ? std::move(r->second)
                          : ErrorReply(m, absl::StrCat("no answer within ",
                                                       std::chrono::duration_cast<std::chrono::seconds>(kTimeout).count(),
                                                       " s")));
  }
  for (v1::ControlReply& r : d.nodes) CapDump(&r, kAnswerBudget / std::max<size_t>(d.nodes.size(), 1));
  // By node rank; nodes outside the round (-1: waiting, spare) last, by host.
  std::stable_sort(d.nodes.begin(), d.nodes.end(), [](const v1::ControlReply& a, const v1::ControlReply& b) {
    const auto key = [](const v1::ControlReply& r) {
      return std::make_pair(r.node_rank() < 0 ? INT32_MAX : r.node_rank(), r.host());
    };
    return key(a) < key(b);
  });
  return d;
}

std::vector<StacksRelay::Done> StacksRelay::TakeDone(TimePoint now) {
  std::vector<Done> done;
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = it->second;
    if (p.replies.size() < p.members.size() && now < p.deadline) {
      ++it;
      continue;
    }
    done.push_back(Complete(p));
    it = pending_.erase(it);
  }
  return done;
}

}  // namespace drun
