#include "engine_context.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

#include "muster/common/strings.h"
#include "muster/credentials/step_credential.h"

namespace muster::controller {

std::string EngineContext::StepKeyOf(std::string_view node) const {
  return credentials::NodeStepKey(meta_.step_key_secret(), node);
}

EngineContext::EngineContext(EngineOptions options, store::StateStore* store)
    : options_(std::move(options)), store_(store) {
  if (!options_.make_credential) options_.make_credential = [] { return RandomHex(16); };
  for (const NodeConfig& nc : options_.config.nodes) {
    node_index_.emplace(nc.name, node_index_.size());
  }
  partition_limits_ = ComputePartitionLimits(options_.config);
}

std::optional<size_t> EngineContext::NodeIndex(const std::string& name) const {
  auto it = node_index_.find(name);
  if (it == node_index_.end()) return std::nullopt;
  return it->second;
}

const NodeConfig* EngineContext::NodeConfigOf(const std::string& name) const {
  const std::optional<size_t> i = NodeIndex(name);
  return i ? &options_.config.nodes[*i] : nullptr;
}

void EngineContext::Send(const std::string& node, v1::ControllerMessage msg) {
  msg.set_epoch(meta_.epoch());
  outgoing_.push_back({node, std::move(msg)});
}

void EngineContext::CloseSession(const std::string& node) {
  outgoing_.push_back({node, {}, /*close_session=*/true});
}

std::vector<Outgoing> EngineContext::TakeOutgoing() {
  std::vector<Outgoing> out;
  out.swap(outgoing_);
  return out;
}

void EngineContext::Mail(MailNotice notice) {
  if (mail_.size() >= kMaxMailWaiting) {
    spdlog::warn("job={}: mail '{}' dropped: {} mails wait to be sent", notice.job_id,
                 notice.subject, mail_.size());
    return;
  }
  mail_.push_back(std::move(notice));
}

std::vector<MailNotice> EngineContext::TakeMail() {
  std::vector<MailNotice> out;
  out.swap(mail_);
  return out;
}

Status EngineContext::Commit(const store::Mutation& m, store::Durability durability) const {
  if (m.empty()) return Status::Ok();
  return store_->Commit(m, durability);
}

void EngineContext::CommitOrDie(const store::Mutation& m, store::Durability durability) const {
  Status s = Commit(m, durability);
  if (!s.ok()) {
    spdlog::critical(
        "state store write failed: {}; exiting so that recovery restarts from the last durable "
        "state",
        s.ToString());
    spdlog::default_logger()->flush();
    std::abort();
  }
}

}  // namespace muster::controller
