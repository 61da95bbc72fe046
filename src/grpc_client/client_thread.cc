#include "muster/grpc_client/client_thread.h"

#include <grpcpp/client_context.h>

#include <utility>

namespace muster::grpc_client {

ClientThread::~ClientThread() { Stop(); }

void ClientThread::Start(std::function<void()> loop) {
  thread_ = std::thread([this, loop = std::move(loop)] {
    loop();
    // A loop that left by break may still name a call of its own that is gone now.
    std::lock_guard<std::mutex> l(mu_);
    current_ = nullptr;
  });
}

void ClientThread::Stop() {
  stopping_ = true;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (current_) current_->TryCancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool ClientThread::SetCurrent(grpc::ClientContext* ctx) {
  // Checked under the lock Stop cancels under: a call set here is either cancelled by Stop or
  // refused because Stop came first.
  std::lock_guard<std::mutex> l(mu_);
  current_ = stopping_ ? nullptr : ctx;
  return !stopping_;
}

void ClientThread::CancelCurrent() {
  std::lock_guard<std::mutex> l(mu_);
  if (current_) current_->TryCancel();
}

bool ClientThread::WaitFor(std::chrono::milliseconds duration) {
  std::unique_lock<std::mutex> l(mu_);
  return !cv_.wait_for(l, duration, [&] { return stopping_.load(); });
}

void ClientThread::WaitUntil(const std::function<bool()>& ready) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return stopping_.load() || ready(); });
}

void ClientThread::Wake() {
  // Under the lock, so a waiter between checking `ready` and sleeping cannot miss it.
  { std::lock_guard<std::mutex> l(mu_); }
  cv_.notify_all();
}

}  // namespace muster::grpc_client
