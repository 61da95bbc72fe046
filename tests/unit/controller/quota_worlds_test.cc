// Randomized worlds: accounts with random quotas (some in a cohort, some not, one without any),
// in half of them a QoS that preempts the default one, random whole-node jobs (some of that QoS)
// submitted and ended, a pass each step. After every pass: no quota above
// its max, no GPU in two jobs (CheckInvariantsForTest), an account with a job within its
// guarantee starts one within a few passes (its GPUs come back within a pass plus grace), a job
// that preempted starts in the pass after its victims left, and no two jobs push each other off
// in turn. Seeded, so a failure names the world that shows it.
#include <cstdlib>
#include <random>
#include <sstream>

#include "engine_fixture.h"

namespace muster::controller {
namespace {

struct World {
  uint32_t seed = 0;
  std::string config;
  struct Account {
    std::string name;
    std::string user;
    uint32_t uid = 0;
    bool quota = false;
    uint32_t guaranteed = 0;
    uint32_t max = 0;  // the effective ceiling
  };
  std::vector<Account> accounts;
  bool high_qos = false;  // a QoS "high" that preempts "normal" (any account may use it)
};

constexpr uint32_t kNodes = 6;  // of 8 h100 each

World MakeWorld(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  World w;
  w.seed = seed;
  std::ostringstream c;
  c << "cluster_name = \"t\"\n[scheduling]\nkill_grace_ms = 100\n"
    << "[[nodes]]\nnames = \"node[1-" << kNodes << "]\"\ncpus = 16\nmemory_mb = 64000\ngpus = 8\n"
    << "gpu_type = \"h100\"\ntopology = \"spine1/leaf1\"\n"
    << "[[partition]]\nname = \"gpu\"\nnodes = \"node[1-" << kNodes << "]\"\ndefault = true\n"
    << "[[qos]]\nname = \"normal\"\ngrace_time = \"1s\"\n";
  w.high_qos = pick(2) != 0;
  if (w.high_qos) {
    c << "[[qos]]\nname = \"high\"\npriority = 100\npreempt = [\"normal\"]\n"
      << "grace_time = \"1s\"\n";
  }
  const uint32_t n = 2 + pick(3);
  uint32_t left = kNodes * 8;  // guarantees never promise more than the cluster has
  for (uint32_t i = 0; i < n; ++i) {
    World::Account a;
    a.name = "a" + std::to_string(i);
    a.user = "u" + std::to_string(i);
    a.uid = 2000 + i;
    a.quota = true;
    a.guaranteed = std::min(left, 8 * pick(4));
    left -= a.guaranteed;
    const bool cohort = pick(5) != 0;
    c << "[[accounts]]\nname = \"" << a.name << "\"\nusers = [\"" << a.user << "\"]\n";
    if (cohort) c << "cohort = \"c\"\n";
    c << "quota = { h100 = { guaranteed = " << a.guaranteed;
    a.max = cohort ? 1000 : a.guaranteed;
    if (pick(2)) {
      a.max = a.guaranteed + 8 * pick(3);
      c << ", max = " << a.max;
    }
    if (pick(2)) c << ", lending_limit = " << (a.guaranteed * pick(3)) / 2;
    c << " } }\n";
    w.accounts.push_back(a);
  }
  if (pick(2)) {
    w.accounts.push_back({"free", "uf", 2100, false, 0, 0});
    c << "[[accounts]]\nname = \"free\"\nusers = [\"uf\"]\n";
  }
  w.config = c.str();
  return w;
}

class QuotaWorlds : public EngineTest {};

TEST_F(QuotaWorlds, InvariantsHoldAfterEveryPass) {
  const uint32_t worlds = 2000;
  uint64_t preemptions = 0, starts = 0;
  // MUSTER_WORLD=N replays one world (a failure names it).
  const char* only = std::getenv("MUSTER_WORLD");
  for (uint32_t seed = only ? std::atoi(only) : 1; seed <= (only ? std::atoi(only) : worlds);
       ++seed) {
    const World w = MakeWorld(seed);
    auto c = ParseConfig(w.config, "world.toml");
    ASSERT_TRUE(c.ok()) << c.status().ToString() << "\n" << w.config;
    config_ = *c;
    store_ = store::InMemoryStateStore();
    Restart();
    for (uint32_t k = 1; k <= kNodes; ++k) Up("node" + std::to_string(k));
    std::mt19937 rng(seed * 7919);
    std::vector<uint64_t> jobs;
    std::map<std::string, int> starved;  // account -> passes within its guarantee, not served
    std::set<uint64_t> preemptors_to_start;
    std::map<std::pair<uint64_t, uint64_t>, int> pushes;  // (lower id, higher id) -> times
    const std::string where = "world " + std::to_string(seed) + ":\n" + w.config;
    for (int step = 0; step < 30; ++step) {
      if (rng() % 10 < 6) {
        const World::Account& a = w.accounts[rng() % w.accounts.size()];
        v1::JobSpec spec = Gang(rng() % 5 == 0 ? 2 : 1, 8);
        if (w.high_qos && rng() % 4 == 0) spec.set_qos("high");
        auto id = Submit(spec, {a.uid, a.uid, a.user, false});
        ASSERT_TRUE(id.ok()) << id.status().ToString() << "\n" << where;
        jobs.push_back(*id);
      }
      if (rng() % 10 < 3 && !jobs.empty()) {
        const uint64_t id = jobs[rng() % jobs.size()];
        const v1::JobInfo j = Job(id);
        if (j.state() == v1::RUNNING) {
          Exited(id, j.nodes(0), 0);
          for (const auto& node : j.nodes()) Cleaned(id, node, j.requeue_count());
        }
      }
      // Who started in this pass, per account; jobs that preempted must have started.
      std::map<uint64_t, v1::JobState> before;
      for (uint64_t id : jobs) before[id] = Job(id).state();
      Pass();
      if (only) {  // replaying one world: its story, pass by pass
        std::printf("--- step %d\n", step);
        for (uint64_t id : jobs) {
          const v1::JobInfo j = Job(id);
          std::printf("job %llu %s %s %u node(s) %s%s %s %s\n", static_cast<unsigned long long>(id),
                      j.account().c_str(), j.qos().c_str(), j.num_nodes(),
                      v1::JobState_Name(j.state()).c_str(), j.borrowed() ? " borrowed" : "",
                      j.reason().c_str(), j.reason_detail().c_str());
        }
      }
      std::set<std::string> served;
      for (uint64_t id : jobs) {
        const v1::JobInfo j = Job(id);
        if (j.state() == v1::RUNNING && before[id] != v1::RUNNING) {
          served.insert(j.account());
          ++starts;
          for (const auto& node : j.nodes()) Started(id, node);
        }
      }
      for (uint64_t id : preemptors_to_start) {
        const v1::JobInfo j = Job(id);
        EXPECT_NE(j.state(), v1::PENDING)
            << "job " << id << " preempted others but did not start once they left: " << j.reason()
            << " " << j.reason_detail() << "\n"
            << where;
      }
      preemptors_to_start.clear();
      // Quotas: never above their max.
      auto all = engine_->ListAccounts(Root());
      ASSERT_TRUE(all.ok());
      std::map<std::string, uint64_t> used;
      for (const v1::QuotaUse& u : all->quota_use()) used[u.account()] = u.used();
      for (const World::Account& a : w.accounts) {
        if (!a.quota) continue;
        EXPECT_LE(used[a.name], a.max) << a.name << " step " << step << "\n" << where;
      }
      // Guarantees: an account with a pending job that fits its guaranteed part is served
      // within a few passes (victims leave between passes here).
      std::map<std::string, std::string> within;  // account -> its waiting jobs and reasons
      for (uint64_t id : jobs) {
        const v1::JobInfo j = Job(id);
        if (j.state() == v1::PENDING && !j.reason_detail().empty() &&
            j.reason_detail().rfind("preempting", 0) == 0) {
          preemptors_to_start.insert(id);
        }
        if (j.state() != v1::PENDING) continue;
        if (j.reason() == "Preempted" && before[id] == v1::RUNNING) {
          // Who it made room for; two jobs never push each other off in turn.
          const std::string& d = j.reason_detail();
          const size_t at = d.find(" by job ");
          ASSERT_NE(at, std::string::npos) << d;
          const uint64_t by = std::stoull(d.substr(at + 8));
          // By quota alone, never both ways. With QoS, once each way may happen when jobs
          // ended in between (B took A's borrowed GPUs by QoS, then A's account, with room in
          // its guarantee again, took them back); a third time is a loop.
          const auto pair = std::minmax(id, by);
          EXPECT_LT(++pushes[pair], w.high_qos ? 3 : 2)
              << "jobs " << id << " (" << j.account() << ") and " << by << " (" << Job(by).account()
              << ") pushed each other off in turn\n"
              << where;
        }
        for (const World::Account& a : w.accounts) {
          if (a.name == j.account() && a.quota &&
              used[a.name] + uint64_t{j.num_nodes()} * 8 <= a.guaranteed) {
            within[a.name] += " job " + std::to_string(id) + " (" + j.qos() + "): " + j.reason() +
                              " " + j.reason_detail() + ";";
          }
        }
      }
      for (const World::Account& a : w.accounts) {
        if (within[a.name].empty() || served.count(a.name)) {
          starved[a.name] = 0;
        } else if (++starved[a.name] > 3) {
          ADD_FAILURE() << "account " << a.name << " (guaranteed " << a.guaranteed << ", using "
                        << used[a.name] << ") waited 3 passes for its guarantee, step " << step
                        << ":" << within[a.name] << "\n"
                        << where;
          starved[a.name] = 0;
        }
      }
      // Victims leave: every node that still cleans up reports it.
      for (uint64_t id : jobs) {
        const v1::JobInfo j = Job(id);
        if (j.completing() || (j.state() == v1::PENDING && j.preempt_count() > 0)) {
          for (const auto& node : j.nodes()) Cleaned(id, node, j.requeue_count() - 1);
        }
      }
      now_ += 1000;
    }
    for (uint64_t id : jobs) preemptions += Job(id).preempt_count();
    if (HasFailure()) break;
  }
  // The worlds did exercise borrowing and reclaim, and every preemption let a job start.
  if (only) return;
  EXPECT_GT(preemptions, worlds / 10);
  EXPECT_GT(starts, worlds * 5);
  EXPECT_LT(preemptions, starts);
  std::printf("%u worlds: %llu starts, %llu preemptions\n", worlds,
              static_cast<unsigned long long>(starts),
              static_cast<unsigned long long>(preemptions));
}

}  // namespace
}  // namespace muster::controller
