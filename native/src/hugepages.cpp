#include "hugepages.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1+; older kernels answer EINVAL and khugepaged does it later
#endif
#endif

std::vector<MapRegion> readSelfMaps() {
  std::vector<MapRegion> out;
#if defined(__linux__)
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line)) {
    // start-end perms offset dev inode [path]
    std::istringstream ls(line);
    std::string range, perms, offset, dev, inode, path;
    ls >> range >> perms >> offset >> dev >> inode;
    std::getline(ls, path);
    path.erase(0, path.find_first_not_of(' '));
    auto dash = range.find('-');
    if (dash == std::string::npos) continue;
    MapRegion r;
    r.start = std::stoull(range.substr(0, dash), nullptr, 16);
    r.end = std::stoull(range.substr(dash + 1), nullptr, 16);
    r.writablePrivate = perms.rfind("rw", 0) == 0 && perms.size() >= 4 && perms[3] == 'p';
    r.path = path;
    out.push_back(std::move(r));
  }
#endif
  return out;
}

#if defined(__linux__)
// The parts of [start, end) that no region of `before` covered.
static std::vector<std::pair<uintptr_t, uintptr_t>> uncovered(uintptr_t start, uintptr_t end,
                                                             const std::vector<MapRegion> & before) {
  std::vector<std::pair<uintptr_t, uintptr_t>> out;
  uintptr_t at = start;
  for (const auto & b : before) {  // /proc/self/maps lists regions in address order
    if (b.end <= at) continue;
    if (b.start >= end) break;
    if (b.start > at) out.emplace_back(at, b.start);
    at = std::max(at, b.end);
    if (at >= end) break;
  }
  if (at < end) out.emplace_back(at, end);
  return out;
}
#endif

HugePageResult adviseNewMappings(const std::vector<MapRegion> & before, size_t minBytes, bool collapse) {
  HugePageResult res;
#if defined(__linux__)
  const uintptr_t huge = 2u << 20;
  for (const auto & r : readSelfMaps()) {
    if (!r.writablePrivate || !r.path.empty() || r.end - r.start < minBytes) continue;
    for (auto [from, to] : uncovered(r.start, r.end, before)) {
      // Only whole 2 MiB blocks can be huge pages.
      uintptr_t s = (from + huge - 1) & ~(huge - 1), e = to & ~(huge - 1);
      if (e <= s || e - s < minBytes) continue;
      void * p = reinterpret_cast<void *>(s);
      if (madvise(p, e - s, MADV_HUGEPAGE) != 0) {
        if (res.error.empty()) res.error = std::string("madvise(MADV_HUGEPAGE): ") + std::strerror(errno);
        continue;
      }
      res.advisedBytes += e - s;
      if (!collapse) continue;
      // Block by block: MADV_COLLAPSE answers EINVAL for a block nothing has touched
      // yet, which MADV_HUGEPAGE already covers (its first fault takes a huge page).
      for (uintptr_t blk = s; blk < e; blk += huge) {
        if (madvise(reinterpret_cast<void *>(blk), huge, MADV_COLLAPSE) == 0) {
          res.collapsedBytes += huge;
        } else if (errno != EINVAL && res.collapseError.empty()) {
          res.collapseError = std::string("madvise(MADV_COLLAPSE): ") + std::strerror(errno);
        }
      }
    }
  }
#else
  (void) before;
  (void) minBytes;
  (void) collapse;
#endif
  return res;
}

Napi::Object hugePageInfo(Napi::Env env, const HugePageResult & r) {
  auto o = Napi::Object::New(env);
  o.Set("advisedBytes", (double) r.advisedBytes);
  o.Set("collapsedBytes", (double) r.collapsedBytes);
  o.Set("error", r.error.empty() ? env.Null() : Napi::Value(Napi::String::New(env, r.error)));
  o.Set("collapseError", r.collapseError.empty() ? env.Null() : Napi::Value(Napi::String::New(env, r.collapseError)));
  return o;
}
