// StacksRelay (rendezvous/stacks_relay.h): one `drun stacks` request becomes
// one ask per node and one answer, by node rank, that a lost or silent node
// cannot hold up.
#include "rendezvous/stacks_relay.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace drun {
namespace {

using Member = StacksRelay::Member;

const TimePoint kT0 = TimePoint() + std::chrono::hours(1);

v1::ControlReply Dump(const std::string& host, int ranks, const std::string& text) {
  v1::ControlReply r;
  r.set_host(host);
  r.set_local_ranks(ranks);
  r.set_dump(text);
  return r;
}

StacksRelay::Asker ByNode(StacksRelay::NodeId node, uint64_t request_id) {
  return {StacksRelay::Asker::Kind::kNode, node, request_id};
}

Member M(StacksRelay::NodeId node, const std::string& host, int node_rank) {
  Member m;
  m.node = node;
  m.host = host;
  m.node_rank = node_rank;
  return m;
}

std::vector<Member> ThreeNodes() {
  // Known in join order; node 7 holds group rank 0.
  return {M(5, "b", 1), M(7, "a", 0), M(9, "spare", -1)};
}

TEST(StacksRelayTest, AsksEveryNodeAndAnswersByNodeRankOnceAllReplied) {
  StacksRelay relay;
  std::vector<StacksRelay::Ask> asks = relay.Start(ByNode(7, 42), ThreeNodes(), kT0);
  ASSERT_EQ(asks.size(), 3u);
  const uint64_t id = asks[0].id;
  for (const auto& a : asks) EXPECT_EQ(a.id, id);
  relay.OnReply(5, id, Dump("b", 2, "rank 2\n"));
  relay.OnReply(7, id, Dump("a", 2, "rank 0\n"));
  EXPECT_TRUE(relay.TakeDone(kT0).empty());  // the spare has not answered
  v1::ControlReply spare;
  spare.set_error("no worker runs on this node now");
  relay.OnReply(9, id, spare);
  std::vector<StacksRelay::Done> done = relay.TakeDone(kT0);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].asker.node, 7u);
  EXPECT_EQ(done[0].asker.request_id, 42u);
  ASSERT_EQ(done[0].nodes.size(), 3u);
  EXPECT_EQ(done[0].nodes[0].host(), "a");
  EXPECT_EQ(done[0].nodes[0].node_rank(), 0);
  EXPECT_EQ(done[0].nodes[1].host(), "b");
  EXPECT_EQ(done[0].nodes[1].node_rank(), 1);
  EXPECT_EQ(done[0].nodes[2].host(), "spare");
  EXPECT_EQ(done[0].nodes[2].node_rank(), -1);
  EXPECT_EQ(done[0].nodes[2].error(), "no worker runs on this node now");
  EXPECT_FALSE(relay.NextDeadline());  // nothing pending
}

TEST(StacksRelayTest, LostNodeAnswersWithAnErrorAndDoesNotHoldUpTheOthers) {
  StacksRelay relay;
  const uint64_t id = relay.Start({StacksRelay::Asker::Kind::kLocal, 0, 1}, ThreeNodes(), kT0)[0].id;
  relay.OnReply(7, id, Dump("a", 1, "x\n"));
  relay.OnReply(9, id, Dump("spare", 0, ""));
  relay.OnLost(5);
  std::vector<StacksRelay::Done> done = relay.TakeDone(kT0);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].asker.kind, StacksRelay::Asker::Kind::kLocal);
  EXPECT_EQ(done[0].nodes[1].host(), "b");
  EXPECT_EQ(done[0].nodes[1].error(), "its agent was lost before it answered");
}

TEST(StacksRelayTest, SilentNodeIsNamedAtTheDeadline) {
  StacksRelay relay;
  const uint64_t id = relay.Start(ByNode(7, 1), ThreeNodes(), kT0)[0].id;
  relay.OnReply(7, id, Dump("a", 1, "x\n"));
  relay.OnReply(9, id, Dump("spare", 0, ""));
  ASSERT_TRUE(relay.NextDeadline());
  EXPECT_EQ(*relay.NextDeadline(), kT0 + StacksRelay::kTimeout);
  EXPECT_TRUE(relay.TakeDone(kT0 + StacksRelay::kTimeout - std::chrono::milliseconds(1)).empty());
  std::vector<StacksRelay::Done> done = relay.TakeDone(kT0 + StacksRelay::kTimeout);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].nodes[1].error(), "no answer within 45 s");
  EXPECT_EQ(done[0].nodes[0].dump(), "x\n");
  // A reply after the answer went out changes nothing.
  relay.OnReply(5, id, Dump("b", 1, "late\n"));
  EXPECT_TRUE(relay.TakeDone(kT0 + StacksRelay::kTimeout).empty());
}

TEST(StacksRelayTest, RequestsAreIndependentAndRepliesGoToTheirOwn) {
  StacksRelay relay;
  const uint64_t first = relay.Start(ByNode(7, 1), {M(7, "a", 0)}, kT0)[0].id;
  const uint64_t second = relay.Start(ByNode(5, 1), {M(7, "a", 0)}, kT0)[0].id;
  EXPECT_NE(first, second);
  relay.OnReply(7, second, Dump("a", 1, "second\n"));
  relay.OnReply(7, second, Dump("a", 1, "repeat\n"));  // a repeat keeps the first
  relay.OnReply(99, first, Dump("stranger", 1, ""));    // not a member: ignored
  std::vector<StacksRelay::Done> done = relay.TakeDone(kT0);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].asker.node, 5u);
  ASSERT_EQ(done[0].nodes.size(), 1u);
  EXPECT_EQ(done[0].nodes[0].dump(), "second\n");
}

TEST(StacksRelayTest, NoMembersIsDoneAtOnce) {
  StacksRelay relay;
  EXPECT_TRUE(relay.Start(ByNode(7, 3), {}, kT0).empty());
  std::vector<StacksRelay::Done> done = relay.TakeDone(kT0);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].nodes.empty());
}

TEST(StacksRelayTest, AnAnswerStaysUnderItsBudgetCutAtALineEnd) {
  StacksRelay relay;
  std::vector<Member> members;
  for (int i = 0; i < 4; ++i) members.push_back(M(static_cast<uint64_t>(i + 1), "h", i));
  const uint64_t id = relay.Start(ByNode(1, 1), members, kT0)[0].id;
  const std::string line(99, 'x');
  std::string big;
  while (big.size() < StacksRelay::kAnswerBudget) big += line + "\n";
  for (uint64_t n = 1; n <= 4; ++n) {
    v1::ControlReply r = Dump("h", 1, big);
    r.set_dump_file("/logs/stacks_1.txt");
    relay.OnReply(n, id, r);
  }
  std::vector<StacksRelay::Done> done = relay.TakeDone(kT0);
  ASSERT_EQ(done.size(), 1u);
  size_t total = 0;
  for (const v1::ControlReply& r : done[0].nodes) {
    total += r.dump().size();
    const size_t note = r.dump().rfind("\n[");
    ASSERT_NE(note, std::string::npos);
    EXPECT_EQ(r.dump().substr(note - line.size(), line.size()), line);  // whole lines kept
    EXPECT_NE(r.dump().find("more bytes not sent; the whole dump is in /logs/stacks_1.txt]\n", note),
              std::string::npos);
  }
  EXPECT_LT(total, StacksRelay::kAnswerBudget + 4 * 200);
}

}  // namespace
}  // namespace drun
