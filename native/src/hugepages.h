#pragma once
// Weights, KV cache and compute buffers on 2 MiB pages (Linux transparent huge
// pages). Decoding reads every weight once per token; on 4 KiB pages that walk
// misses the TLB on most of them (the 0.5B benchmark model decodes ~8 % faster per
// token than from a mapped file the page cache holds in small folios; policy and
// figures: libs/engine/src/models/huge-pages.ts).
// llama.cpp exposes no pointer to its buffers, so they are found by comparing
// /proc/self/maps before and after they are allocated.

#include <napi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

struct MapRegion {
  uintptr_t start = 0, end = 0;
  bool writablePrivate = false;  // "rw-p": memory a buffer can live in
  std::string path;              // empty for anonymous memory
};

struct HugePageResult {
  size_t advisedBytes = 0;   // bytes given MADV_HUGEPAGE
  size_t collapsedBytes = 0; // bytes MADV_COLLAPSE moved onto huge pages at once
  std::string error;         // first MADV_HUGEPAGE failure, if any (the load goes on without)
  // First MADV_COLLAPSE failure other than "nothing there yet": no huge page free
  // at that moment (ENOMEM, EAGAIN); those blocks stay small until khugepaged.
  std::string collapseError;
};

std::vector<MapRegion> readSelfMaps();

// Advises (MADV_HUGEPAGE) all anonymous read-write memory at least minBytes long
// that was not mapped in `before`: new parts of a mapping the kernel merged with
// an older neighbour count, the older part does not. The model loader calls it
// once its weight buffers exist and before it reads into them, so their pages
// are faulted in huge; `collapse` also moves pages already in use (MADV_COLLAPSE,
// Linux 6.1+), for buffers llama.cpp clears as it creates them.
HugePageResult adviseNewMappings(const std::vector<MapRegion> & before, size_t minBytes, bool collapse);

// { advisedBytes, collapsedBytes, error, collapseError } for JS.
Napi::Object hugePageInfo(Napi::Env env, const HugePageResult & r);
