// User objects (cudaUserObjectCreate and friends): reference-counted
// destructors that graphs hold on to, so that what their nodes use lives as
// long as the graphs do (cuda-python's graph builder keeps kernel arguments
// alive this way). They live in the guest alone. A destructor runs when the
// last reference goes, after the call that released it has dropped its
// locks (CUDA runs it on a thread of its own, at a time of its choosing;
// it must not call CUDA either way).
#include <map>
#include <mutex>
#include <vector>

#include "state.hpp"

namespace wh::guest {
namespace {

struct UserObject {
  void* ptr;
  cudaHostFn_t destroy;
  uint64_t refs;
};

std::mutex g_mu;
std::map<cudaUserObject_t, UserObject*> g_objects;
std::vector<std::pair<cudaHostFn_t, void*>> g_due;  // destructors to run

UserObject* find_locked(cudaUserObject_t o) {
  auto it = g_objects.find(o);
  return it == g_objects.end() ? nullptr : it->second;
}

}  // namespace

bool user_object_ref(cudaUserObject_t o, unsigned n) {
  std::lock_guard lk(g_mu);
  UserObject* u = find_locked(o);
  if (!u || n == 0 || u->refs + n < u->refs) return false;
  u->refs += n;
  return true;
}

void user_object_unref(cudaUserObject_t o, unsigned n) {
  std::lock_guard lk(g_mu);
  UserObject* u = find_locked(o);
  if (!u) return;
  u->refs -= std::min<uint64_t>(n, u->refs);
  if (u->refs) return;
  g_due.emplace_back(u->destroy, u->ptr);
  g_objects.erase(o);
  delete u;
}

void run_user_object_destructors() {
  std::vector<std::pair<cudaHostFn_t, void*>> due;
  {
    std::lock_guard lk(g_mu);
    due.swap(g_due);
  }
  for (auto& [fn, p] : due) fn(p);
}

bool user_object_live(cudaUserObject_t o) {
  std::lock_guard lk(g_mu);
  return find_locked(o) != nullptr;
}

}  // namespace wh::guest

using namespace wh::guest;

extern "C" {

cudaError_t cudaUserObjectCreate(cudaUserObject_t* out, void* ptr, cudaHostFn_t destroy, unsigned initial,
                                 unsigned flags) {
  if (!out || !destroy || initial == 0 || flags != cudaUserObjectNoDestructorSync)
    return set_error(cudaErrorInvalidValue);
  auto* u = new UserObject{ptr, destroy, initial};
  std::lock_guard lk(g_mu);
  *out = reinterpret_cast<cudaUserObject_t>(u);
  g_objects[*out] = u;
  return cudaSuccess;
}

cudaError_t cudaUserObjectRetain(cudaUserObject_t o, unsigned count) {
  return set_error(user_object_ref(o, count) ? cudaSuccess : cudaErrorInvalidValue);
}

cudaError_t cudaUserObjectRelease(cudaUserObject_t o, unsigned count) {
  if (count == 0 || !user_object_live(o)) return set_error(cudaErrorInvalidValue);
  user_object_unref(o, count);
  run_user_object_destructors();
  return cudaSuccess;
}

}  // extern "C"
