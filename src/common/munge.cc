#include "muster/common/munge.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <munge.h>
#include <netinet/in.h>

#include <cstdlib>
#include <mutex>

namespace muster {

// The libmunge functions used, resolved by name.
struct Munge::Api {
  munge_ctx_t (*ctx_create)();
  void (*ctx_destroy)(munge_ctx_t);
  munge_err_t (*ctx_set)(munge_ctx_t, int, ...);
  munge_err_t (*ctx_get)(munge_ctx_t, int, ...);
  const char* (*ctx_strerror)(munge_ctx_t);
  munge_err_t (*encode)(char**, munge_ctx_t, const void*, int);
  munge_err_t (*decode)(const char*, munge_ctx_t, void**, int*, uid_t*, gid_t*);
  const char* (*strerror)(munge_err_t);
};

namespace {

// The largest credential or payload accepted: a credential of this protocol is a few hundred
// bytes (base64 of a payload of a few dozen).
constexpr size_t kMaxCredentialBytes = 16 * 1024;

template <typename F>
bool Resolve(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(::dlsym(lib, name));
  return *out != nullptr;
}

// One context per call, freed on every path.
class Context {
 public:
  Context(const Munge::Api& api) : api_(api), ctx_(api.ctx_create()) {}
  ~Context() {
    if (ctx_) api_.ctx_destroy(ctx_);
  }
  munge_ctx_t get() const { return ctx_; }
  std::string Error(munge_err_t e) const {
    const char* s = ctx_ ? api_.ctx_strerror(ctx_) : nullptr;
    return s ? s : api_.strerror(e);
  }

 private:
  const Munge::Api& api_;
  munge_ctx_t ctx_;
};

bool IsSocketError(munge_err_t e) { return e == EMUNGE_SOCKET || e == EMUNGE_TIMEOUT; }

}  // namespace

Result<const Munge*> Munge::Get() {
  static std::once_flag once;
  static Munge* munge = nullptr;
  static std::string error;
  std::call_once(once, [] {
    void* lib = ::dlopen("libmunge.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = ::dlerror();
      error = std::string("MUNGE is not installed on this host (") + (e ? e : "libmunge.so.2") +
              "); install Debian's munge package and run munged with the cluster's key";
      return;
    }
    static Api api;
    bool ok = Resolve(lib, "munge_ctx_create", &api.ctx_create) &&
              Resolve(lib, "munge_ctx_destroy", &api.ctx_destroy) &&
              Resolve(lib, "munge_ctx_set", &api.ctx_set) &&
              Resolve(lib, "munge_ctx_get", &api.ctx_get) &&
              Resolve(lib, "munge_ctx_strerror", &api.ctx_strerror) &&
              Resolve(lib, "munge_encode", &api.encode) &&
              Resolve(lib, "munge_decode", &api.decode) &&
              Resolve(lib, "munge_strerror", &api.strerror);
    if (!ok) {
      error = "libmunge.so.2 lacks a function Muster needs (a MUNGE older than 0.5?)";
      return;
    }
    munge = new Munge();
    munge->api_ = &api;
  });
  if (!munge) return FailedPrecondition(error);
  return munge;
}

Result<std::string> Munge::Encode(const std::string& socket, const std::string& payload,
                                  int ttl_s) const {
  if (payload.size() > kMaxCredentialBytes) return InvalidArgument("MUNGE payload too large");
  Context ctx(*api_);
  if (!ctx.get()) return Internal("cannot create a MUNGE context (out of memory)");
  api_->ctx_set(ctx.get(), MUNGE_OPT_SOCKET, socket.c_str());
  api_->ctx_set(ctx.get(), MUNGE_OPT_TTL, ttl_s);
  char* cred = nullptr;
  munge_err_t e = api_->encode(&cred, ctx.get(), payload.data(), static_cast<int>(payload.size()));
  if (e != EMUNGE_SUCCESS) {
    std::free(cred);
    std::string why =
        "cannot get a MUNGE credential from munged at " + socket + ": " + ctx.Error(e);
    return IsSocketError(e) ? Unavailable(why) : Internal(why);
  }
  std::string out(cred);
  std::free(cred);
  return out;
}

Result<MungeIdentity> Munge::Decode(const std::string& socket,
                                    const std::string& credential) const {
  if (credential.empty() || credential.size() > kMaxCredentialBytes ||
      credential.find('\0') != std::string::npos) {
    return Unauthenticated("not a MUNGE credential");
  }
  Context ctx(*api_);
  if (!ctx.get()) return Internal("cannot create a MUNGE context (out of memory)");
  api_->ctx_set(ctx.get(), MUNGE_OPT_SOCKET, socket.c_str());
  void* payload = nullptr;
  int len = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  munge_err_t e = api_->decode(credential.c_str(), ctx.get(), &payload, &len, &uid, &gid);
  MungeIdentity id;
  if (payload && len > 0) id.payload.assign(static_cast<const char*>(payload), len);
  std::free(payload);  // allocated for some errors too (replayed, expired)
  if (e != EMUNGE_SUCCESS) {
    if (IsSocketError(e)) {
      return Unavailable("munged at " + socket + " does not answer: " + ctx.Error(e));
    }
    return Unauthenticated("MUNGE credential refused: " + ctx.Error(e));
  }
  id.uid = uid;
  id.gid = gid;
  int ttl = 0;
  if (api_->ctx_get(ctx.get(), MUNGE_OPT_TTL, &ttl) == EMUNGE_SUCCESS) id.ttl_s = ttl;
  struct in_addr addr {};
  if (api_->ctx_get(ctx.get(), MUNGE_OPT_ADDR4, &addr) == EMUNGE_SUCCESS && addr.s_addr != 0) {
    char text[INET_ADDRSTRLEN] = {};
    if (::inet_ntop(AF_INET, &addr, text, sizeof text)) id.origin = text;
  }
  return id;
}

}  // namespace muster
