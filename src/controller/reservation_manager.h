// Advance reservations (scontrol create/update/delete reservation): admins make them, the store
// keeps them, each pass gets their windows (core::AdvanceReservation; the core keeps other jobs
// off them and confines their own jobs to them), and the clock ends them (a daily or weekly one
// moves on to its next occurrence instead).
//
// Strand-confined.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine_context.h"
#include "muster/controller/engine.h"
#include "muster/core/types.h"
#include "muster/store/state_store.h"
#include "muster/v1/controller.pb.h"

namespace muster::controller {

class AccountManager;

class ReservationManager {
 public:
  ReservationManager(EngineContext& ctx, const AccountManager& accounts);

  // At recovery. Nodes the config no longer has leave the records (changes go into `m`).
  void Restore(const std::vector<v1::ReservationRecord>& stored, store::Mutation& m);

  const v1::ReservationRecord* Find(const std::string& name) const;
  const std::map<std::string, v1::ReservationRecord>& all() const { return reservations_; }

  // Every reservation's windows (a recurring one's occurrences over the coming week or two).
  void AddWindows(core::ClusterView& view, TimeMs now) const;
  // The reservation active on each node now (null: none), by node index.
  std::vector<const v1::ReservationRecord*> ActiveByNode(TimeMs now) const;
  // Whether a job of `user` charging `account` may use reservation `name`. NOT_FOUND or
  // PERMISSION_DENIED saying why.
  Status CheckUse(const Caller& caller, const std::string& name, const std::string& user,
                  const std::string& account) const;
  // The latest end of a job started now in `name` (its current occurrence's end); kNever when
  // the reservation is flex, unknown or not active.
  TimeMs EndOfRunIn(const std::string& name, TimeMs now) const;

  // Ends reservations whose time is over (recurring ones move on). True when one changed.
  bool Tick(TimeMs now);

  // Admins only. `live` is the scheduler's view of the nodes now, without the reservation's own
  // jobs; `in_use` names an unfinished job that uses a reservation ("" when none). *name gets
  // the reservation's name (chosen when an ADD gives none).
  Status Update(const Caller& caller, const v1::UpdateReservationRequest& req, TimeMs now,
                const core::ClusterView& live,
                const std::function<std::string(const std::string&)>& in_use, std::string* name);

 private:
  // The occurrences of `r` that end after `now`, within the horizon the scheduler plans over.
  std::vector<std::pair<TimeMs, TimeMs>> Occurrences(const v1::ReservationRecord& r,
                                                     TimeMs now) const;
  // Another reservation that shares nodes and time with `r` where neither may overlap, or null.
  const v1::ReservationRecord* Clash(const v1::ReservationRecord& r, TimeMs now,
                                     std::string* node) const;

  EngineContext& ctx_;
  const AccountManager& accounts_;
  std::map<std::string, v1::ReservationRecord> reservations_;
};

}  // namespace muster::controller
