#include "munge_verifier.h"

namespace muster::rpc {

MungeVerifier::MungeVerifier(const Munge& munge, std::string socket, std::string payload,
                             size_t max_queued)
    : munge_(munge),
      socket_(std::move(socket)),
      payload_(std::move(payload)),
      max_queued_(max_queued),
      worker_([this] { Run(); }) {}

MungeVerifier::~MungeVerifier() {
  std::deque<std::pair<std::string, Done>> left;
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    left.swap(queue_);
  }
  cv_.notify_all();
  worker_.join();
  for (auto& [cred, done] : left) done(Unavailable("the controller is stopping"));
}

void MungeVerifier::Verify(std::string credential, Done done) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!stop_ && queue_.size() < max_queued_) {
      queue_.emplace_back(std::move(credential), std::move(done));
      cv_.notify_one();
      return;
    }
  }
  done(Unavailable("too many connections are authenticating; try again"));
}

void MungeVerifier::Run() {
  for (;;) {
    std::pair<std::string, Done> item;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    Result<MungeIdentity> id = munge_.Decode(socket_, item.first);
    if (id.ok() && id->payload != payload_) {
      // Made for another service, or for another cluster that shares the key.
      id = Unauthenticated("the MUNGE credential was not made for this cluster's API");
    }
    item.second(std::move(id));
  }
}

}  // namespace muster::rpc
