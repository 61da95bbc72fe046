#include "muster/credentials/node_proof.h"

#include <gtest/gtest.h>

#include "muster/credentials/step_credential.h"

namespace muster::credentials {
namespace {

const std::string kKey(kKeySize, 'k');

TEST(NodeProofTest, AFreshChallengeAnsweredWithTheNodesKeyPassesOnce) {
  NodeChallenges c;
  const std::string nonce = c.Issue(1'000);
  const std::string proof = NodeProof(kKey, nonce, "node1", "i1");
  EXPECT_TRUE(c.Check(nonce, proof, kKey, "node1", "i1", 2'000).ok());
  // The same answer again (a replay) is refused.
  Status again = c.Check(nonce, proof, kKey, "node1", "i1", 2'500);
  EXPECT_EQ(again.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(again.message().find("answered before"), std::string::npos) << again.message();
}

TEST(NodeProofTest, AWrongKeyNodeOrInstanceIsRefused) {
  NodeChallenges c;
  const std::string nonce = c.Issue(1'000);
  const std::string other(kKeySize, 'x');
  EXPECT_FALSE(
      c.Check(nonce, NodeProof(other, nonce, "node1", "i1"), kKey, "node1", "i1", 1'100).ok());
  EXPECT_FALSE(
      c.Check(nonce, NodeProof(kKey, nonce, "node2", "i1"), kKey, "node1", "i1", 1'100).ok());
  EXPECT_FALSE(
      c.Check(nonce, NodeProof(kKey, nonce, "node1", "i2"), kKey, "node1", "i1", 1'100).ok());
  EXPECT_FALSE(c.Check(nonce, "", kKey, "node1", "i1", 1'100).ok());
  // None of those spent it.
  EXPECT_TRUE(
      c.Check(nonce, NodeProof(kKey, nonce, "node1", "i1"), kKey, "node1", "i1", 1'100).ok());
}

TEST(NodeProofTest, ChallengesOfAnotherControllerOrTooOldAreRefused) {
  NodeChallenges mine, theirs;
  const std::string foreign = theirs.Issue(1'000);
  EXPECT_FALSE(mine.Check(foreign, NodeProof(kKey, foreign, "n", "i"), kKey, "n", "i", 1'000).ok());
  const std::string old = mine.Issue(1'000);
  Status late = mine.Check(old, NodeProof(kKey, old, "n", "i"), kKey, "n", "i",
                           1'001 + NodeChallenges::kMaxAgeMs);
  EXPECT_NE(late.message().find("expired"), std::string::npos) << late.message();
  std::string forged = mine.Issue(5'000);
  forged[0] ^= 1;  // the time changed: the tag no longer matches
  EXPECT_FALSE(mine.Fresh(forged, 5'000).ok());
  EXPECT_FALSE(mine.Fresh("short", 5'000).ok());
}

}  // namespace
}  // namespace muster::credentials
