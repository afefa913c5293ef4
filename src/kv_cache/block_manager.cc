#include "kv_cache/block_manager.h"

#include <algorithm>
#include <cassert>
#include <iterator>

namespace inflight::kv_cache {
namespace {

// 64-bit mix of the parent's hash and the block's tokens (splitmix64 finalizer per word).
// Collisions are tolerated: a match also compares the parent's key id and the tokens.
std::uint64_t DefaultChainHash(std::uint64_t parent_hash, std::span<const TokenIdType> tokens) {
  auto mix = [](std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  std::uint64_t h = mix(parent_hash ^ 0x5bd1e9955bd1e995ull);
  for (TokenIdType t : tokens) h = mix(h ^ static_cast<std::uint32_t>(t));
  return h;
}

const std::vector<std::int32_t> kEmptyTable;

}  // namespace

BlockManager::BlockManager(std::int64_t num_blocks, std::int32_t tokens_per_block,
                           bool enable_reuse)
    : tokens_per_block_(tokens_per_block),
      enable_reuse_(enable_reuse),
      hash_fn_(&DefaultChainHash),
      blocks_(static_cast<std::size_t>(std::max<std::int64_t>(num_blocks, 0))) {
  assert(num_blocks >= 1 && "num_blocks must be >= 1");
  assert(tokens_per_block >= 1 && "tokens_per_block must be >= 1");
  for (std::int64_t b = 0; b < num_blocks; ++b) free_.push_back(static_cast<std::int32_t>(b));
}

std::int64_t BlockManager::BlocksForTokens(std::int64_t num_tokens) const {
  return num_tokens <= 0 ? 0 : (num_tokens + tokens_per_block_ - 1) / tokens_per_block_;
}

std::int64_t BlockManager::NumFreeBlocks() const {
  return static_cast<std::int64_t>(free_.size() + lru_.size());
}

std::int32_t BlockManager::Lookup(std::uint64_t hash, std::uint64_t parent_key_id,
                                  std::span<const TokenIdType> tokens) const {
  auto [begin, end] = index_.equal_range(hash);
  for (auto it = begin; it != end; ++it) {
    const Block& b = blocks_[it->second];
    if (b.parent_key_id == parent_key_id && std::ranges::equal(b.tokens, tokens)) return it->second;
  }
  return -1;
}

PrefixMatch BlockManager::MatchPrefix(std::span<const TokenIdType> tokens) const {
  PrefixMatch match;
  if (!enable_reuse_ || tokens.empty()) return match;
  // NOTE: never the whole prompt: the last token must be computed so the step produces its logits.
  const std::size_t max_blocks = (tokens.size() - 1) / tokens_per_block_;
  std::uint64_t parent_hash = 0;
  std::uint64_t parent_key = 0;
  for (std::size_t i = 0; i < max_blocks; ++i) {
    auto slice = tokens.subspan(i * tokens_per_block_, tokens_per_block_);
    const std::uint64_t h = hash_fn_(parent_hash, slice);
    const std::int32_t b = Lookup(h, parent_key, slice);
    if (b < 0) break;
    ++match.num_blocks;
    if (blocks_[b].ref_count > 0) ++match.num_blocks_in_use;
    parent_hash = h;
    parent_key = blocks_[b].key_id;
  }
  return match;
}

std::optional<std::int32_t> BlockManager::AllocatePrompt(SeqId seq,
                                                         std::span<const TokenIdType> tokens,
                                                         bool reuse_prefix) {
  auto existing = seqs_.find(seq);
  assert((existing == seqs_.end() || existing->second.table.empty()) &&
         "AllocatePrompt: the sequence already holds blocks; Free it first");
  if (existing != seqs_.end() && !existing->second.table.empty()) return std::nullopt;

  // Walk the chain once, remembering the matched blocks and their links.
  std::vector<std::int32_t> matched;
  std::vector<Link> links;
  if (enable_reuse_ && reuse_prefix && !tokens.empty()) {
    const std::size_t max_blocks = (tokens.size() - 1) / tokens_per_block_;
    Link parent;
    for (std::size_t i = 0; i < max_blocks; ++i) {
      auto slice = tokens.subspan(i * tokens_per_block_, tokens_per_block_);
      const std::uint64_t h = hash_fn_(parent.hash, slice);
      const std::int32_t b = Lookup(h, parent.key_id, slice);
      if (b < 0) break;
      matched.push_back(b);
      parent = Link{h, blocks_[b].key_id};
      links.push_back(parent);
    }
  }
  const std::int64_t num_total = BlocksForTokens(static_cast<std::int64_t>(tokens.size()));
  const std::int64_t num_new = num_total - static_cast<std::int64_t>(matched.size());
  const auto num_matched_cached =
      std::ranges::count_if(matched, [this](std::int32_t b) { return blocks_[b].ref_count == 0; });
  // Matched blocks sitting in the LRU are counted in NumFreeBlocks but are not available for new
  // ones.
  if (num_new > NumFreeBlocks() - num_matched_cached) return std::nullopt;

  SeqState& st = seqs_[seq];
  st.table.reserve(static_cast<std::size_t>(num_total));
  // Take the matched blocks out of the LRU before evicting anything for the new ones.
  for (std::int32_t b : matched) {
    Block& block = blocks_[b];
    if (block.ref_count == 0) lru_.erase(block.lru_pos);
    ++block.ref_count;
    st.table.push_back(b);
  }
  for (std::int64_t i = 0; i < num_new; ++i) {
    const std::int32_t b = TakeFreshBlock();
    blocks_[b].ref_count = 1;
    st.table.push_back(b);
  }
  st.chain = std::move(links);
  st.stats.reused_blocks += static_cast<std::int64_t>(matched.size());
  st.stats.alloc_new_blocks += num_new;
  st.stats.alloc_total_blocks += num_total;
  total_reused_ += static_cast<std::int64_t>(matched.size());
  total_alloc_new_ += num_new;
  return static_cast<std::int32_t>(matched.size()) * tokens_per_block_;
}

bool BlockManager::EnsureCapacity(SeqId seq, std::int32_t num_tokens_total) {
  auto it = seqs_.find(seq);
  const std::int64_t have =
      it == seqs_.end() ? 0 : static_cast<std::int64_t>(it->second.table.size());
  const std::int64_t num_new = BlocksForTokens(num_tokens_total) - have;
  if (num_new <= 0) return true;
  if (num_new > NumFreeBlocks()) return false;
  SeqState& st = it == seqs_.end() ? seqs_[seq] : it->second;
  for (std::int64_t i = 0; i < num_new; ++i) {
    const std::int32_t b = TakeFreshBlock();
    blocks_[b].ref_count = 1;
    st.table.push_back(b);
  }
  st.stats.alloc_new_blocks += num_new;
  st.stats.alloc_total_blocks += num_new;
  total_alloc_new_ += num_new;
  return true;
}

void BlockManager::CommitTokens(SeqId seq, std::span<const TokenIdType> all_tokens,
                                std::int32_t num_computed) {
  if (!enable_reuse_) return;
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  SeqState& st = it->second;
  const std::size_t num_known = std::min<std::size_t>(all_tokens.size(), std::max(num_computed, 0));
  const std::size_t num_full = std::min(num_known / tokens_per_block_, st.table.size());
  for (std::size_t i = st.chain.size(); i < num_full; ++i) {
    auto slice = all_tokens.subspan(i * tokens_per_block_, tokens_per_block_);
    const Link parent = i == 0 ? Link{} : st.chain[i - 1];
    const std::uint64_t h = hash_fn_(parent.hash, slice);
    const std::int32_t same = Lookup(h, parent.key_id, slice);
    if (same >= 0) {
      // Another sequence computed the same block first: keep its key, ours stays private (and is
      // freed, not cached, when we are done). Our children still chain to the shared key.
      st.chain.push_back(Link{h, blocks_[same].key_id});
      continue;
    }
    const std::int32_t b = st.table[i];
    Block& block = blocks_[b];
    assert(!block.keyed && "a block past the sequence's chain cannot be keyed already");
    block.keyed = true;
    block.hash = h;
    block.key_id = next_key_id_++;
    block.parent_key_id = parent.key_id;
    block.tokens.assign(slice.begin(), slice.end());
    index_.emplace(h, b);
    st.chain.push_back(Link{h, block.key_id});
  }
}

void BlockManager::Free(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  // NOTE: reverse order, so the deepest block of a chain lands first in the LRU and is evicted
  // first; a parent is worth more than its children (every child match needs the parent).
  const auto& table = it->second.table;
  for (auto b = table.rbegin(); b != table.rend(); ++b) Release(*b);
  seqs_.erase(it);
}

const std::vector<std::int32_t>& BlockManager::BlockTable(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? kEmptyTable : it->second.table;
}

SequenceBlockStats BlockManager::SequenceStats(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? SequenceBlockStats{} : it->second.stats;
}

KvCacheStats BlockManager::Stats() const {
  KvCacheStats s;
  s.max_num_blocks = num_blocks();
  s.free_num_blocks = NumFreeBlocks();
  s.used_num_blocks = s.max_num_blocks - s.free_num_blocks;
  s.tokens_per_block = tokens_per_block_;
  s.alloc_new_blocks = total_alloc_new_;
  s.reused_blocks = total_reused_;
  s.alloc_total_blocks = total_alloc_new_ + total_reused_;
  s.cache_hit_rate = s.alloc_total_blocks == 0 ? 0.0
                                               : static_cast<double>(s.reused_blocks) /
                                                     static_cast<double>(s.alloc_total_blocks);
  return s;
}

std::int32_t BlockManager::TakeFreshBlock() {
  assert(NumFreeBlocks() > 0);
  std::int32_t b;
  if (!free_.empty()) {
    b = free_.front();
    free_.pop_front();
  } else {
    b = lru_.front();
    lru_.pop_front();
    DropKey(b);
  }
  return b;
}

void BlockManager::DropKey(std::int32_t b) {
  Block& block = blocks_[b];
  auto [begin, end] = index_.equal_range(block.hash);
  for (auto it = begin; it != end; ++it) {
    if (it->second == b) {
      index_.erase(it);
      break;
    }
  }
  block.keyed = false;
  block.tokens.clear();
  block.hash = block.key_id = block.parent_key_id = 0;
}

void BlockManager::Release(std::int32_t b) {
  Block& block = blocks_[b];
  assert(block.ref_count > 0);
  if (--block.ref_count > 0) return;
  if (block.keyed) {
    lru_.push_back(b);
    block.lru_pos = std::prev(lru_.end());
  } else {
    free_.push_back(b);
  }
}

std::string BlockManager::CheckInvariants() const {
  const std::size_t n = blocks_.size();
  std::vector<std::int32_t> occurrences(n, 0);
  for (const auto& [seq, st] : seqs_) {
    std::vector<bool> seen(n, false);
    for (std::int32_t b : st.table) {
      if (b < 0 || static_cast<std::size_t>(b) >= n) {
        return "sequence " + std::to_string(seq) + " holds block id " + std::to_string(b) +
               " outside [0, " + std::to_string(n) + ")";
      }
      if (seen[b]) {
        return "sequence " + std::to_string(seq) + " holds block " + std::to_string(b) + " twice";
      }
      seen[b] = true;
      ++occurrences[b];
    }
    if (st.chain.size() > st.table.size()) {
      return "sequence " + std::to_string(seq) + " has " + std::to_string(st.chain.size()) +
             " chain links but " + std::to_string(st.table.size()) + " blocks";
    }
  }
  // 0: not listed, 1: free list, 2: LRU.
  std::vector<int> listed(n, 0);
  for (std::int32_t b : free_) {
    if (listed[b] != 0) return "block " + std::to_string(b) + " listed twice in free/LRU";
    listed[b] = 1;
  }
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    const std::int32_t b = *it;
    if (listed[b] != 0) return "block " + std::to_string(b) + " listed twice in free/LRU";
    listed[b] = 2;
    if (blocks_[b].lru_pos != it) return "block " + std::to_string(b) + " has a stale LRU position";
  }
  std::size_t num_keyed = 0;
  for (std::size_t b = 0; b < n; ++b) {
    const Block& block = blocks_[b];
    const std::string id = "block " + std::to_string(b);
    if (block.ref_count != occurrences[b]) {
      return id + " has ref_count " + std::to_string(block.ref_count) + " but is in " +
             std::to_string(occurrences[b]) + " tables";
    }
    const int expected = block.ref_count > 0 ? 0 : (block.keyed ? 2 : 1);
    if (listed[b] != expected) {
      return id + " (ref " + std::to_string(block.ref_count) + ", keyed " +
             std::to_string(block.keyed) + ") is in list " + std::to_string(listed[b]) +
             ", expected " + std::to_string(expected) + " (0 none, 1 free, 2 LRU)";
    }
    if (block.ref_count > 1 && !block.keyed) return id + " is shared but not a keyed full block";
    if (block.keyed) {
      ++num_keyed;
      if (block.tokens.size() != static_cast<std::size_t>(tokens_per_block_)) {
        return id + " is keyed with " + std::to_string(block.tokens.size()) + " tokens";
      }
      auto [begin, end] = index_.equal_range(block.hash);
      if (std::count_if(begin, end, [&](const auto& e) { return e.second == (std::int32_t)b; }) !=
          1) {
        return id + " is keyed but not indexed exactly once under its hash";
      }
    }
  }
  if (index_.size() != num_keyed) {
    return "index has " + std::to_string(index_.size()) + " entries for " +
           std::to_string(num_keyed) + " keyed blocks";
  }
  return {};
}

}  // namespace inflight::kv_cache
