// Backend sampling: which sequences get their request's sampler chain into the
// compute graph for a step (llama_set_sampler), and which clone samples them.
#pragma once

#include <cstdint>
#include <vector>

struct ContextState;
struct SamplerState;
struct common_sampler;

// One sample request of a step, as the binder sees it.
struct GraphSample {
  int32_t index;                     // batch entry
  SamplerState * smpl;
  bool rawLogits;                    // wants the raw logits (top logprobs)
  common_sampler * graph = nullptr;  // out: the clone that samples it in the graph, or none (the CPU does)
};

// Engine thread, before a step's first decode. A sequence with logits in the batch
// gets its request's chain in: one logits entry, sampled, by a chain the graph can
// run, no raw logits wanted. Otherwise it gets it out (top logprobs, prompt rows,
// logits(), a grammar: llama.cpp samples a bounded number of rows per sequence and
// copies no raw logits for rows it samples).
void bindGraphSamplers(ContextState & cs, const std::vector<int32_t> & seq, const std::vector<uint8_t> & logits,
                       std::vector<GraphSample> & samples);
