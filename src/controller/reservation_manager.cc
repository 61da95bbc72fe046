#include "reservation_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "account_manager.h"
#include "live_records.h"
#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "muster/controller/access.h"
#include "muster/core/advance_reservation.h"

namespace muster::controller {
namespace {

constexpr TimeMs kDay = 86'400'000;
constexpr TimeMs kWeek = 7 * kDay;
constexpr TimeMs kTenYears = 3653 * kDay;
constexpr size_t kMaxListItems = 1024;

TimeMs PeriodOf(const v1::ReservationRecord& r) {
  return r.daily() ? kDay : r.weekly() ? kWeek : 0;
}

// "+a,-b": every item adds or removes (an update's way); otherwise the list replaces.
bool AllSigned(const std::vector<std::string>& items) {
  return !items.empty() && std::all_of(items.begin(), items.end(), [](const std::string& s) {
    return !s.empty() && (s[0] == '+' || s[0] == '-');
  });
}

struct Flags {
  bool maint, ignore_jobs, daily, weekly, flex, overlap;
};

Flags FlagsOf(const v1::ReservationRecord& r) {
  return {r.maint(), r.ignore_jobs(), r.daily(), r.weekly(), r.flex(), r.overlap()};
}

// "maint,ignore_jobs" replaces the flags; "+flex,-maint" (every item signed, MODIFY only) adds
// and removes. Case does not matter; Slurm's SPEC_NODES (it only reports) is accepted.
Status ApplyFlags(const std::string& text, bool modify, Flags* f) {
  const std::vector<std::string> items = Split(text, ',', true);
  const bool all_signed = AllSigned(items);
  if (all_signed && !modify) {
    return InvalidArgument("flags of a new reservation are given without + or -");
  }
  if (!all_signed) *f = {};
  for (std::string item : items) {
    bool on = true;
    if (all_signed) {
      on = item[0] == '+';
      item = item.substr(1);
    }
    const std::string k = ToLower(item);
    if (k == "spec_nodes") continue;  // Slurm reports it; named nodes say as much here
    const std::pair<const char*, bool*> known[] = {
        {"maint", &f->maint}, {"ignore_jobs", &f->ignore_jobs},
        {"daily", &f->daily}, {"weekly", &f->weekly},
        {"flex", &f->flex},   {"overlap", &f->overlap}};
    bool* slot = nullptr;
    for (const auto& [flag, field] : known) {
      if (k == flag) slot = field;
    }
    if (!slot) {
      return InvalidArgument("unknown reservation flag '" + item.substr(0, 32) +
                             "' (maint, ignore_jobs, daily, weekly, flex, overlap)");
    }
    *slot = on;
  }
  return Status::Ok();
}

// Users or accounts: a plain list replaces, an all-signed one (MODIFY) adds and removes.
Status ApplyList(const std::string& text, bool modify, const char* what,
                 google::protobuf::RepeatedPtrField<std::string>* list) {
  const std::vector<std::string> items = Split(text, ',', true);
  if (items.size() > kMaxListItems) {
    return InvalidArgument(std::string("at most 1024 ") + what + " per reservation");
  }
  const bool all_signed = AllSigned(items);
  std::set<std::string> now;
  if (all_signed && modify) now.insert(list->begin(), list->end());
  for (std::string item : items) {
    bool add = true;
    if (all_signed) {
      add = item[0] == '+';
      item = item.substr(1);
    }
    if (!IsValidAccountName(item)) {
      return InvalidArgument(std::string("bad name in ") + what + ": '" + item.substr(0, 64) + "'");
    }
    if (add) {
      now.insert(item);
    } else {
      now.erase(item);
    }
  }
  list->Clear();
  for (const std::string& s : now) *list->Add() = s;
  return Status::Ok();
}

bool Overlaps(const std::pair<TimeMs, TimeMs>& a, const std::pair<TimeMs, TimeMs>& b) {
  return a.first < b.second && b.first < a.second;
}

}  // namespace

ReservationManager::ReservationManager(EngineContext& ctx, const AccountManager& accounts)
    : ctx_(ctx), accounts_(accounts) {}

void ReservationManager::Restore(const std::vector<v1::ReservationRecord>& stored,
                                 store::Mutation& m) {
  for (v1::ReservationRecord r : stored) {
    v1::ReservationRecord kept = r;
    kept.clear_nodes();
    kept.clear_gpus();
    for (int k = 0; k < r.nodes_size(); ++k) {
      if (!ctx_.NodeIndex(r.nodes(k))) {
        spdlog::warn("reservation {}: node {} is no longer in the config; dropped", r.name(),
                     r.nodes(k));
        continue;
      }
      kept.add_nodes(r.nodes(k));
      if (k < r.gpus_size()) kept.add_gpus(r.gpus(k));
    }
    if (kept.nodes_size() != r.nodes_size()) m.PutReservation(kept);
    reservations_[kept.name()] = std::move(kept);
  }
}

const v1::ReservationRecord* ReservationManager::Find(const std::string& name) const {
  auto it = reservations_.find(name);
  return it == reservations_.end() ? nullptr : &it->second;
}

std::vector<std::pair<TimeMs, TimeMs>> ReservationManager::Occurrences(
    const v1::ReservationRecord& r, TimeMs now) const {
  std::vector<std::pair<TimeMs, TimeMs>> out;
  const TimeMs period = PeriodOf(r);
  if (period == 0) {
    if (r.end_ms() > now) out.emplace_back(r.start_ms(), r.end_ms());
    return out;
  }
  // A day's or a week's worth beyond the longest useful forecast: eight days, or two weeks.
  const TimeMs horizon = now + (r.daily() ? 8 * kDay : 2 * kWeek);
  TimeMs s = r.start_ms(), e = r.end_ms();
  for (int k = 0; k < 16 && s < horizon; ++k, s += period, e += period) {
    if (e > now) out.emplace_back(s, e);
  }
  return out;
}

void ReservationManager::AddWindows(core::ClusterView& view, TimeMs now) const {
  for (const auto& [name, r] : reservations_) {
    core::AdvanceReservation a;
    a.name = name;
    a.maint = r.maint();
    a.flex = r.flex();
    std::vector<std::pair<core::NodeIndex, uint32_t>> nodes;
    for (int k = 0; k < r.nodes_size(); ++k) {
      if (auto i = ctx_.NodeIndex(r.nodes(k))) {
        nodes.emplace_back(static_cast<core::NodeIndex>(*i), k < r.gpus_size() ? r.gpus(k) : 0);
      }
    }
    std::sort(nodes.begin(), nodes.end());
    for (const auto& [n, g] : nodes) {
      a.nodes.push_back(n);
      if (r.gpus_size() > 0) a.gpus.push_back(g);
    }
    for (const auto& [s, e] : Occurrences(r, now)) {
      a.start_ms = s;
      a.end_ms = e;
      view.advance.push_back(a);
    }
  }
  std::sort(view.advance.begin(), view.advance.end(),
            [](const core::AdvanceReservation& x, const core::AdvanceReservation& y) {
              return x.start_ms != y.start_ms ? x.start_ms < y.start_ms : x.name < y.name;
            });
}

std::vector<const v1::ReservationRecord*> ReservationManager::ActiveByNode(TimeMs now) const {
  std::vector<const v1::ReservationRecord*> out(ctx_.config().nodes.size(), nullptr);
  for (const auto& [name, r] : reservations_) {
    if (!(r.start_ms() <= now && now < r.end_ms())) continue;
    for (const std::string& node : r.nodes()) {
      auto i = ctx_.NodeIndex(node);
      if (!i) continue;
      // A maintenance reservation shows over another one.
      if (!out[*i] || (r.maint() && !out[*i]->maint())) out[*i] = &r;
    }
  }
  return out;
}

Status ReservationManager::CheckUse(const Caller& caller, const std::string& name,
                                    const std::string& user, const std::string& account) const {
  const v1::ReservationRecord* r = Find(name);
  if (!r) {
    return NotFound("invalid reservation '" + name.substr(0, 64) +
                    "': no such reservation (`scontrol show reservation` lists them)");
  }
  if (May(caller, Action::kAnyReservation)) return Status::Ok();
  const bool user_ok = std::find(r->users().begin(), r->users().end(), user) != r->users().end();
  bool account_ok = false;
  // An account listed covers its sub-accounts.
  for (std::string a = account; !a.empty() && !account_ok;) {
    account_ok = std::find(r->accounts().begin(), r->accounts().end(), a) != r->accounts().end();
    auto rec = accounts_.accounts().find(a);
    a = rec != accounts_.accounts().end() ? rec->second.parent() : "";
  }
  if (user_ok || account_ok) return Status::Ok();
  return PermissionDenied(
      "access denied to reservation " + name + ": it is for " +
      (r->users().empty() ? std::string()
                          : "users " + Join({r->users().begin(), r->users().end()}, ",")) +
      (!r->users().empty() && !r->accounts().empty() ? " and " : "") +
      (r->accounts().empty()
           ? std::string()
           : "accounts " + Join({r->accounts().begin(), r->accounts().end()}, ",")) +
      (r->users().empty() && r->accounts().empty() ? "admins only" : ""));
}

TimeMs ReservationManager::EndOfRunIn(const std::string& name, TimeMs now) const {
  const v1::ReservationRecord* r = Find(name);
  if (!r || r->flex()) return core::kNever;
  for (const auto& [s, e] : Occurrences(*r, now)) {
    if (s <= now && now < e) return e;
  }
  return core::kNever;
}

bool ReservationManager::Tick(TimeMs now) {
  store::Mutation m;
  std::vector<std::string> ended;
  for (auto& [name, r] : reservations_) {
    if (r.end_ms() > now) continue;
    const TimeMs period = PeriodOf(r);
    if (period == 0) {
      ended.push_back(name);
      m.DeleteReservation(name);
      continue;
    }
    const TimeMs skip = (now - r.end_ms()) / period + 1;
    r.set_start_ms(r.start_ms() + skip * period);
    r.set_end_ms(r.end_ms() + skip * period);
    m.PutReservation(r);
  }
  if (m.empty()) return false;
  ctx_.CommitOrDie(m);
  for (const std::string& name : ended) {
    spdlog::info("reservation {} ended", name);
    reservations_.erase(name);
  }
  return true;
}

const v1::ReservationRecord* ReservationManager::Clash(const v1::ReservationRecord& r, TimeMs now,
                                                       std::string* node) const {
  if (r.maint() || r.overlap()) return nullptr;
  const std::set<std::string> mine(r.nodes().begin(), r.nodes().end());
  const auto when = Occurrences(r, now);
  for (const auto& [name, o] : reservations_) {
    if (name == r.name() || o.maint() || o.overlap()) continue;
    if (r.gpus_size() > 0 && o.gpus_size() > 0) continue;  // GPU counts were planned side by side
    const std::string* shared = nullptr;
    for (const std::string& n : o.nodes()) {
      if (mine.count(n)) {
        shared = &n;
        break;
      }
    }
    if (!shared) continue;
    for (const auto& a : when) {
      for (const auto& b : Occurrences(o, now)) {
        if (Overlaps(a, b)) {
          *node = *shared;
          return &o;
        }
      }
    }
  }
  return nullptr;
}

Status ReservationManager::Update(const Caller& caller, const v1::UpdateReservationRequest& req,
                                  TimeMs now, const core::ClusterView& live,
                                  const std::function<std::string(const std::string&)>& in_use,
                                  std::string* name_out) {
  MUSTER_RETURN_IF_ERROR(Authorize(caller, Action::kManageReservations));
  std::string name = req.name();
  if (!name.empty() && !IsValidAccountName(name)) {
    return InvalidArgument("bad reservation name '" + name.substr(0, 64) +
                           "': letters, digits, '.', '_' and '-', at most 64");
  }
  auto it = reservations_.find(name);
  const bool add = req.op() == v1::ACCOUNT_OP_ADD;
  // Reservations are live only (none in the config file).
  MUSTER_RETURN_IF_ERROR(
      CheckLiveChange(req.op(), "reservation", name, it != reservations_.end(), false, ""));
  *name_out = name;
  if (req.op() == v1::ACCOUNT_OP_REMOVE) {
    if (std::string job = in_use(name); !job.empty()) {
      return FailedPrecondition("reservation " + name + " is in use by " + job +
                                " (cancel its jobs, or let them end, first)");
    }
    store::Mutation m;
    m.DeleteReservation(name);
    MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
    reservations_.erase(it);
    return Status::Ok();
  }
  v1::ReservationRecord r;
  if (add) {
    if (name.empty()) {
      for (uint32_t k = 1; name.empty() || reservations_.count(name); ++k) {
        name = caller.user + "_" + std::to_string(k);
      }
    }
    r.set_name(name);
    r.set_created_by(caller.user);
    r.set_create_time_ms(now);
  } else {
    r = it->second;
  }
  *name_out = name;

  // When.
  const TimeMs old_start = r.start_ms(), old_end = r.end_ms();
  TimeMs start = req.has_start_ms() ? req.start_ms() : add ? now : old_start;
  if (req.has_start_ms() && start < now) start = now;  // "now", as the client saw it
  if (start > now + kTenYears) return InvalidArgument("a reservation begins within ten years");
  TimeMs end;
  if (req.has_end_ms()) {
    end = req.end_ms();
  } else if (req.has_duration_ms()) {
    if (req.duration_ms() <= 0 || req.duration_ms() > kTenYears) {
      return InvalidArgument("a reservation's duration is more than 0 and at most ten years");
    }
    end = start + req.duration_ms();
  } else if (!add) {
    end = start + (old_end - old_start);
  } else {
    return InvalidArgument("a reservation needs an end: a duration or an end time");
  }
  if (end <= start) return InvalidArgument("a reservation must end after it begins");
  if (end - start > kTenYears) return InvalidArgument("a reservation lasts at most ten years");
  r.set_start_ms(start);
  r.set_end_ms(end);

  // Flags, and who.
  Flags f = FlagsOf(r);
  if (req.has_flags()) MUSTER_RETURN_IF_ERROR(ApplyFlags(req.flags(), !add, &f));
  if (f.daily && f.weekly) return InvalidArgument("a reservation is daily or weekly, not both");
  if (f.daily && end - start > kDay) {
    return InvalidArgument("a daily reservation lasts at most a day");
  }
  if (f.weekly && end - start > kWeek) {
    return InvalidArgument("a weekly reservation lasts at most a week");
  }
  r.set_maint(f.maint);
  r.set_ignore_jobs(f.ignore_jobs);
  r.set_daily(f.daily);
  r.set_weekly(f.weekly);
  r.set_flex(f.flex);
  r.set_overlap(f.overlap);
  if (req.has_users())
    MUSTER_RETURN_IF_ERROR(ApplyList(req.users(), !add, "users", r.mutable_users()));
  if (req.has_accounts()) {
    MUSTER_RETURN_IF_ERROR(ApplyList(req.accounts(), !add, "accounts", r.mutable_accounts()));
    for (const std::string& a : r.accounts()) {
      if (!accounts_.Exists(a)) return NotFound("account " + a + " does not exist");
    }
  }
  if (r.users_size() == 0 && r.accounts_size() == 0) {
    return InvalidArgument("name who may use the reservation: users and/or accounts");
  }

  // Where: named nodes, a count of nodes, or a count of GPUs.
  const Config& config = ctx_.config();
  const bool where_given = req.has_nodes() || req.has_node_count() || req.has_gpus();
  if (where_given) {
    const int given =
        (req.has_nodes() ? 1 : 0) + (req.has_node_count() ? 1 : 0) + (req.has_gpus() ? 1 : 0);
    if (given > 1) {
      return InvalidArgument("give the nodes, a node count or a GPU count, only one of them");
    }
    r.clear_nodes();
    r.clear_gpus();
    r.set_node_count(req.has_node_count() ? req.node_count() : 0);
    r.set_gpu_count(req.has_gpus() ? req.gpus() : 0);
    r.set_gpu_type(req.has_gpus() && req.has_gpu_type() ? req.gpu_type() : "");
    if (req.has_node_count() && (req.node_count() == 0 || req.node_count() > config.nodes.size())) {
      return InvalidArgument("a node count between 1 and the " +
                             std::to_string(config.nodes.size()) + " nodes of the cluster");
    }
    if (req.has_gpus() && (req.gpus() == 0 || req.gpus() > 1'000'000)) {
      return InvalidArgument("a GPU count between 1 and 1000000");
    }
  } else if (add) {
    return InvalidArgument("a reservation needs nodes, a node count or a GPU count");
  }
  if (req.has_partition()) r.set_partition(req.partition());
  const PartitionConfig* part = nullptr;
  if (!r.partition().empty()) {
    for (const PartitionConfig& p : config.partitions) {
      if (p.name == r.partition()) part = &p;
    }
    if (!part) return NotFound("partition " + r.partition().substr(0, 64) + " does not exist");
  } else if (r.node_count() > 0 || r.gpu_count() > 0) {
    part = config.DefaultPartition();
    if (!part) return InvalidArgument("name a partition to choose the nodes from");
    r.set_partition(part->name);
  }
  if (!r.gpu_type().empty()) {
    const bool known = std::any_of(config.nodes.begin(), config.nodes.end(),
                                   [&](const NodeConfig& n) { return n.gpu_type == r.gpu_type(); });
    if (!known) return NotFound("no node has GPUs of type " + r.gpu_type().substr(0, 64));
  }

  core::ReservationAsk ask;
  ask.name = name;
  ask.start_ms = start;
  ask.end_ms = end;
  ask.ignore_jobs = r.ignore_jobs();
  ask.node_count = r.node_count();
  ask.gpus = r.gpu_count();
  ask.gpu_type = r.gpu_type();
  if (part) {
    for (const std::string& n : part->nodes) {
      if (auto i = ctx_.NodeIndex(n)) ask.candidates.push_back(static_cast<core::NodeIndex>(*i));
    }
  }
  if (r.node_count() == 0 && r.gpu_count() == 0) {
    std::vector<std::string> names;
    if (req.has_nodes()) {
      if (ToLower(req.nodes()) == "all") {
        for (const NodeConfig& n : config.nodes) names.push_back(n.name);
      } else {
        MUSTER_ASSIGN_OR_RETURN(names, ExpandHostlist(req.nodes(), config.nodes.size() + 1));
      }
    } else {
      names.assign(r.nodes().begin(), r.nodes().end());
    }
    if (names.empty()) return InvalidArgument("a reservation needs at least one node");
    for (const std::string& n : names) {
      auto i = ctx_.NodeIndex(n);
      if (!i) return NotFound("invalid node name: " + n.substr(0, 64) + " is not in the cluster");
      ask.nodes.push_back(static_cast<core::NodeIndex>(*i));
    }
  }
  const bool replan = add || where_given || start != old_start || end != old_end ||
                      (req.has_flags() && !r.ignore_jobs());
  if (replan) {
    MUSTER_ASSIGN_OR_RETURN(core::ReservationPlan plan, core::PlanReservation(live, ask, now));
    r.clear_nodes();
    r.clear_gpus();
    for (size_t k = 0; k < plan.nodes.size(); ++k) {
      r.add_nodes(live.nodes[plan.nodes[k]].name);
      if (!plan.gpus.empty()) r.add_gpus(plan.gpus[k]);
    }
  }
  std::string node;
  if (const v1::ReservationRecord* o = Clash(r, now, &node)) {
    return FailedPrecondition("reservation " + o->name() + " already holds node " + node +
                              " then (from " + FormatTimestamp(o->start_ms()) + " to " +
                              FormatTimestamp(o->end_ms()) +
                              "); give one of them the overlap or maint flag");
  }
  store::Mutation m;
  m.PutReservation(r);
  MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
  reservations_[name] = std::move(r);
  return Status::Ok();
}

}  // namespace muster::controller
