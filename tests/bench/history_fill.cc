// Fills a controller's state directory with archived (finished) jobs, each with a batch script
// and two steps, so that accounting queries (sacct) can be timed over a realistic history.
//   usage: history_fill STATE_DIR COUNT      (the controller must not be running)
#include <cstdio>
#include <cstdlib>
#include <string>

#include "muster/store/state_store.h"

int main(int argc, char** argv) {
  using namespace muster;
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s STATE_DIR COUNT\n", argv[0]);
    return 2;
  }
  const uint64_t count = std::strtoull(argv[2], nullptr, 10);
  auto store = store::OpenRocksDbStateStore(argv[1]);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  auto loaded = (*store)->LoadAll();
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
    return 1;
  }
  // Ids above everything there, so the controller's next id moves past them at recovery.
  uint64_t first = loaded->max_history_job_id + 1;
  for (const auto& j : loaded->jobs) first = std::max(first, j.id() + 1);
  if (loaded->meta) first = std::max(first, loaded->meta->next_job_id());
  const int64_t now_ms = static_cast<int64_t>(std::time(nullptr)) * 1000;
  store::Mutation m;
  for (uint64_t i = 0; i < count; ++i) {
    v1::JobRecord r;
    r.set_id(first + i);
    v1::JobSpec* s = r.mutable_spec();
    s->set_name("train-" + std::to_string(i % 100));
    s->set_user(i % 3 == 0 ? "alice" : "bob");
    s->set_uid(i % 3 == 0 ? 1000 : 1001);
    s->add_partitions("gpu");
    s->set_nodes(2);
    s->set_ntasks(16);
    s->set_gpus_per_node(8);
    s->set_work_dir("/home/alice/run");
    r.set_state(i % 10 == 0 ? v1::FAILED : v1::COMPLETED);
    r.set_exit_code(i % 10 == 0 ? 1 : 0);
    // Spread over the last ten days, oldest first.
    const int64_t end = now_ms - static_cast<int64_t>((count - i) * 864'000'000 / count);
    r.set_submit_time_ms(end - 3'600'000);
    r.set_start_time_ms(end - 3'000'000);
    r.set_end_time_ms(end);
    r.set_time_limit_ms(7'200'000);
    v1::Allocation* a = r.mutable_allocation();
    a->set_partition("gpu");
    for (int n = 0; n < 2; ++n) {
      v1::NodeAllocation* na = a->add_nodes();
      na->set_node("gpu" + std::to_string((i * 2 + n) % 512));
      for (uint32_t c = 0; c < 16; ++c) na->add_cpu_ids(c);
      for (uint32_t g = 0; g < 8; ++g) na->add_gpu_indices(g);
      na->set_ntasks(8);
    }
    for (uint32_t st = 0; st < 2; ++st) {
      v1::StepRecord* step = r.add_steps();
      step->set_id(st);
      step->set_name(st == 0 ? "python" : "eval");
      step->set_state(v1::COMPLETED);
      step->set_ntasks(16);
      step->set_start_time_ms(end - 2'900'000 + st * 1'000'000);
      step->set_end_time_ms(end - 2'000'000 + st * 1'000'000);
      *step->add_nodes() = a->nodes(0);
      *step->add_nodes() = a->nodes(1);
    }
    m.ArchiveJob(r);
    if (m.size() >= 20'000) {
      if (auto st = (*store)->Commit(m, store::Durability::kBuffered); !st.ok()) {
        std::fprintf(stderr, "%s\n", st.ToString().c_str());
        return 1;
      }
      m = store::Mutation();
    }
  }
  if (auto st = (*store)->Commit(m); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  std::printf("archived jobs %llu..%llu\n", static_cast<unsigned long long>(first),
              static_cast<unsigned long long>(first + count - 1));
  return 0;
}
