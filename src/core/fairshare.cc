#include "muster/core/fairshare.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <tuple>

namespace muster::core {
namespace {

// A node of the tree: an account (with children) or an association (a leaf).
struct Node {
  const FairShareAccount* account = nullptr;
  const FairShareAssociation* association = nullptr;
  std::vector<size_t> children;
  double usage = 0;  // own (a leaf) or the subtree's
  uint32_t shares = 1;
  double level_fs = 0, norm_shares = 0, norm_usage = 0;
  std::string SortName() const {
    return account ? account->name : association->account + "/" + association->user;
  }
};

constexpr double kInfinity = std::numeric_limits<double>::infinity();

}  // namespace

FairShareResult ComputeFairTree(const std::vector<FairShareAccount>& accounts,
                                const std::vector<FairShareAssociation>& associations) {
  std::vector<Node> nodes(1);  // 0: root
  std::map<std::string, size_t> index = {{"root", 0}};
  for (const FairShareAccount& a : accounts) {
    if (a.name == "root" || index.count(a.name)) continue;
    index[a.name] = nodes.size();
    Node n;
    n.account = &a;
    n.shares = std::max<uint32_t>(a.shares, 1);
    nodes.push_back(std::move(n));
  }
  for (const FairShareAccount& a : accounts) {
    auto self = index.find(a.name);
    if (self == index.end() || self->second == 0) continue;
    auto parent = index.find(a.parent);
    // A missing parent, or one that would close a cycle, makes the account top-level.
    size_t p = parent == index.end() ? 0 : parent->second;
    size_t hops = 0;
    for (size_t at = p; at != 0; ++hops) {
      if (at == self->second || hops > nodes.size()) {
        p = 0;
        break;
      }
      const FairShareAccount* up = nodes[at].account;
      auto next = index.find(up->parent);
      at = next == index.end() ? 0 : next->second;
    }
    nodes[p].children.push_back(self->second);
  }
  size_t leaves = 0;
  for (const FairShareAssociation& as : associations) {
    auto account = index.find(as.account);
    if (account == index.end()) continue;
    Node n;
    n.association = &as;
    n.shares = std::max<uint32_t>(as.shares, 1);
    n.usage = std::max(0.0, as.usage);
    nodes[account->second].children.push_back(nodes.size());
    nodes.push_back(std::move(n));
    ++leaves;
  }
  // Subtree usage, children first.
  std::function<double(size_t)> sum = [&](size_t i) {
    Node& n = nodes[i];
    if (n.association) return n.usage;
    n.usage = 0;
    for (size_t c : n.children) n.usage += sum(c);
    return n.usage;
  };
  sum(0);

  // Each node's level fair-share among its own siblings.
  for (Node& parent : nodes) {
    double shares = 0, usage = 0;
    for (size_t c : parent.children) {
      shares += nodes[c].shares;
      usage += nodes[c].usage;
    }
    for (size_t c : parent.children) {
      Node& k = nodes[c];
      k.norm_shares = shares > 0 ? k.shares / shares : 0;
      k.norm_usage = usage > 0 ? k.usage / usage : 0;
      k.level_fs = k.norm_usage > 0 ? k.norm_shares / k.norm_usage : kInfinity;
    }
  }
  FairShareResult result;
  size_t rank = leaves;
  // Walks a list of siblings, highest level fair-share first. Nodes that tie are taken together:
  // tied users share one rank, and tied accounts' children are merged and walked as one list
  // (so that, say, accounts that have used nothing yet do not rank by name).
  std::function<void(std::vector<size_t>, int)> walk = [&](std::vector<size_t> kids, int depth) {
    std::sort(kids.begin(), kids.end(), [&](size_t a, size_t b) {
      if (nodes[a].level_fs != nodes[b].level_fs) return nodes[a].level_fs > nodes[b].level_fs;
      return nodes[a].SortName() < nodes[b].SortName();
    });
    for (size_t g = 0; g < kids.size();) {
      size_t end = g;
      while (end < kids.size() && nodes[kids[end]].level_fs == nodes[kids[g]].level_fs) ++end;
      const size_t tie_rank = rank;
      std::vector<size_t> merged;
      for (size_t i = g; i < end; ++i) {
        const Node& k = nodes[kids[i]];
        FairShareRow row;
        row.depth = depth;
        row.raw_shares = k.shares;
        row.norm_shares = k.norm_shares;
        row.raw_usage = k.usage;
        row.norm_usage = k.norm_usage;
        row.level_fs = k.level_fs;
        if (k.association) {
          --rank;
          row.account = k.association->account;
          row.user = k.association->user;
          row.factor = leaves ? static_cast<double>(tie_rank) / static_cast<double>(leaves) : 0;
          result.factor[{row.account, row.user}] = row.factor;
        } else {
          row.account = k.account->name;
          merged.insert(merged.end(), k.children.begin(), k.children.end());
        }
        result.rows.push_back(std::move(row));
      }
      if (!merged.empty()) walk(std::move(merged), depth + 1);
      g = end;
    }
  };
  walk(nodes[0].children, 0);
  return result;
}

FairShareResult ComputeDrf(const std::vector<FairShareAccount>& accounts,
                           const std::vector<DrfAssociation>& associations,
                           const std::map<std::string, double>& capacity) {
  // Each account's share of the tree: its shares over its siblings', times its parent's.
  std::map<std::string, const FairShareAccount*> by_name;
  std::map<std::string, double> sibling_shares;  // parent -> sum of its children's shares
  for (const FairShareAccount& a : accounts) {
    if (a.name == "root" || by_name.count(a.name)) continue;
    by_name[a.name] = &a;
  }
  auto parent_of = [&](const FairShareAccount& a) {
    return by_name.count(a.parent) ? a.parent : std::string("root");
  };
  for (const auto& [name, a] : by_name) {
    sibling_shares[parent_of(*a)] += std::max<uint32_t>(a->shares, 1);
  }
  auto weight_of = [&](const std::string& account) {
    double w = 1;
    std::string at = account;
    for (size_t hops = 0; at != "root" && hops <= by_name.size(); ++hops) {
      auto it = by_name.find(at);
      if (it == by_name.end()) return 0.0;
      const std::string up = parent_of(*it->second);
      w *= std::max<uint32_t>(it->second->shares, 1) / sibling_shares[up];
      at = up;
    }
    return w;
  };
  std::map<std::string, double> user_shares_of;  // account -> its users' shares
  for (const DrfAssociation& as : associations) {
    user_shares_of[as.account] += std::max<uint32_t>(as.shares, 1);
  }

  struct Ranked {
    const DrfAssociation* as;
    double weight, dominant;
  };
  std::vector<Ranked> ranked;
  for (const DrfAssociation& as : associations) {
    if (!by_name.count(as.account)) continue;
    const double weight =
        weight_of(as.account) * std::max<uint32_t>(as.shares, 1) / user_shares_of[as.account];
    double dominant = 0;
    for (const auto& [resource, amount] : as.held) {
      auto cap = capacity.find(resource);
      if (cap == capacity.end() || cap->second <= 0) continue;
      dominant = std::max(dominant, amount / cap->second);
    }
    ranked.push_back({&as, weight, weight > 0 ? dominant / weight : kInfinity});
  }
  std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (a.dominant != b.dominant) return a.dominant < b.dominant;
    return std::tie(a.as->account, a.as->user) < std::tie(b.as->account, b.as->user);
  });
  FairShareResult out;
  const double n = static_cast<double>(ranked.size());
  size_t first = 0;  // equal dominant shares share a factor (the better rank)
  for (size_t i = 0; i < ranked.size(); ++i) {
    if (i > 0 && ranked[i - 1].dominant != ranked[i].dominant) first = i;
    const double factor = (n - static_cast<double>(first)) / n;
    const Ranked& r = ranked[i];
    FairShareRow row;
    row.account = r.as->account;
    row.user = r.as->user;
    row.depth = 1;
    row.norm_shares = r.weight;
    row.raw_usage = r.dominant;
    row.factor = factor;
    out.rows.push_back(row);
    out.factor[{r.as->account, r.as->user}] = factor;
  }
  return out;
}

}  // namespace muster::core
