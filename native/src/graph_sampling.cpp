#include "graph_sampling.h"

#include "context.h"
#include "sampler.h"

#include <unordered_map>

namespace {

void unbind(ContextState & cs, int32_t seq) {
  SeqSampler & slot = cs.seqSamplers[seq];
  llama_set_sampler(cs.ctx, seq, nullptr);
  common_sampler_free(slot.clone);
  slot = SeqSampler{};
}

// Room for one more bound chain: every bound chain enlarges llama.cpp's worst-case
// graph (its compute buffer and node budget), so past graphSamplerSlots the least
// recently used one outside this batch goes. False when all of them are in it.
// (A scan per new binding: each sets a chain up for the graph anyway.)
bool makeRoom(ContextState & cs, const std::unordered_map<int32_t, int> & inBatch) {
  int32_t bound = 0, victim = -1;
  for (int32_t s = 0; s < (int32_t) cs.seqSamplers.size(); s++) {
    const SeqSampler & slot = cs.seqSamplers[s];
    if (!slot.clone) continue;
    bound++;
    if (inBatch.count(s)) continue;
    if (victim < 0 || slot.lastUsed < cs.seqSamplers[victim].lastUsed) victim = s;
  }
  if (bound < cs.graphSamplerSlots) return true;
  if (victim < 0) return false;
  unbind(cs, victim);
  return true;
}

}  // namespace

void bindGraphSamplers(ContextState & cs, const std::vector<int32_t> & seq, const std::vector<uint8_t> & logits,
                       std::vector<GraphSample> & samples) {
  if (!cs.backendSampling) return;
  cs.graphStep++;
  std::vector<GraphSample *> byIndex(seq.size(), nullptr);
  for (auto & g : samples) byIndex[g.index] = &g;
  // Per sequence: its logits rows, and the sample that may go in the graph (when one row).
  std::unordered_map<int32_t, int> rows;
  std::unordered_map<int32_t, GraphSample *> eligible;
  std::vector<int32_t> order;  // batch order: with few slots, earlier sequences bind first
  for (size_t i = 0; i < seq.size(); i++) {
    if (!logits[i]) continue;
    if (rows[seq[i]]++ == 0) order.push_back(seq[i]);
    GraphSample * g = byIndex[i];
    eligible[seq[i]] = g && g->smpl->backend && !g->rawLogits ? g : nullptr;
  }
  for (int32_t s : order) {
    SeqSampler & slot = cs.seqSamplers[s];
    GraphSample * g = rows[s] == 1 ? eligible[s] : nullptr;
    if (!g) {
      if (slot.clone) unbind(cs, s);
      continue;
    }
    SamplerState & smpl = *g->smpl;
    if (slot.clone && slot.owner == smpl.id && slot.version == smpl.version) {
      // Already mirrors it (the request's previous step).
    } else if (slot.clone && slot.config == smpl.config) {
      // Same chain, another request (or state): take its state over, no new graph.
      common_sampler_copy(smpl.smpl, slot.clone);
      slot.owner = smpl.id;
      slot.version = smpl.version;
    } else {
      // A new chain for this sequence: set up for the graph (patch 0004: llama.cpp
      // re-plans its graphs only when the bound chains outgrow its node budget).
      if (slot.clone) unbind(cs, s);
      if (!makeRoom(cs, rows)) continue;  // every bound chain is in this batch: the CPU samples this one
      common_sampler * c = common_sampler_clone(smpl.smpl);
      if (!llama_set_sampler(cs.ctx, s, common_sampler_get(c))) {
        common_sampler_free(c);
        smpl.backend = false;  // this chain cannot run in the graph: the CPU samples it from now on
        continue;
      }
      slot = SeqSampler{smpl.id, smpl.version, smpl.config, c, 0};
    }
    slot.lastUsed = cs.graphStep;
    g->graph = slot.clone;
  }
}
