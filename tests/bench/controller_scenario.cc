#include "controller_scenario.h"

#include <algorithm>

namespace muster::bench {

std::string ClusterConfig(uint32_t nodes) {
  // The engine at full size: no per-user pending limit.
  std::string c =
      "cluster_name = \"bench\"\n[scheduling]\nbackfill_depth = 100\nmax_pending_jobs_per_user = "
      "0\n";
  for (uint32_t first = 1; first <= nodes; first += 32) {
    uint32_t last = std::min(nodes, first + 31);
    uint32_t leaf = (first - 1) / 32 + 1, spine = (leaf - 1) / 16 + 1;
    c += "[[nodes]]\nnames = \"gpu[" + std::to_string(first) + "-" + std::to_string(last) +
         "]\"\ncpus = 128\nmemory_mb = 2048000\ngpus = 8\ngpu_type = \"h100\"\ntopology = \"spine" +
         std::to_string(spine) + "/leaf" + std::to_string(leaf) + "\"\n";
  }
  c += "[[partition]]\nname = \"gpu\"\nnodes = \"gpu[1-" + std::to_string(nodes) +
       "]\"\ndefault = true\nmax_time = \"3-0\"\n";
  return c;
}

v1::JobSpec Spec(const core::JobRequest& r, uint32_t k) {
  v1::JobSpec s;
  s.set_name("train-" + std::to_string(k % 500));
  s.set_nodes(r.nodes);
  s.set_gpus_per_node(r.gpus_per_node);
  s.set_ntasks(r.nodes * std::max<uint32_t>(1, r.gpus_per_node));
  s.set_cpus_per_task(8);
  s.set_time_limit_ms(r.time_limit_ms);
  s.set_work_dir("/home/user" + std::to_string(k % 200) + "/experiments");
  s.set_script("#!/bin/bash\n#SBATCH --gpus-per-node=" + std::to_string(r.gpus_per_node) +
               "\nsource ~/venv/bin/activate\nsrun python train.py --config configs/run" +
               std::to_string(k) + ".yaml --epochs 90 --batch-size 256\n");
  for (int v = 0; v < 60; ++v) {
    s.add_environment("VAR_" + std::to_string(v) + "=/opt/software/lib/path/component" +
                      std::to_string(v) + ":/usr/local/lib");
  }
  return s;
}

void RegisterAllNodes(controller::Engine& e, const Config& config, uint32_t nodes,
                      core::TimeMs now) {
  for (uint32_t i = 1; i <= nodes; ++i) {
    v1::RegisterRequest r;
    r.mutable_inventory()->set_name("gpu" + std::to_string(i));
    const NodeConfig* c = config.FindNode(r.inventory().name());
    r.mutable_inventory()->set_cpus(c ? c->cpus : 128);
    r.mutable_inventory()->set_memory_mb(c ? c->memory_mb : 0);
    for (uint32_t g = 0; c && g < c->gpus; ++g) {
      r.mutable_inventory()->add_gpus()->set_type(c->gpu_type);
    }
    r.set_instance_id("i" + std::to_string(i));
    (void)e.RegisterNode(r, now);
    v1::Hello h;
    h.set_node(r.inventory().name());
    h.set_instance_id(r.instance_id());
    (void)e.AttachSession(h, now);
  }
}

}  // namespace muster::bench
