// Host-side KV cache block manager: which pool blocks hold which sequence's tokens.
//
// Pure bookkeeping (no device memory): the model runner owns the pools and reads the block tables.
// Position t of a sequence lives in BlockTable(seq)[t / tokens_per_block].
//
// Every block is in exactly one of three states:
//
//   free     ref 0, no key   handed out first (front of a FIFO)
//   in use   ref >= 1        in `ref` sequences' tables (ref > 1 only for shared prefix blocks)
//   cached   ref 0, keyed    evictable, in an LRU; a later prompt with that prefix takes it back
//
// Prefix reuse (enable_reuse): a block that is FULL and whose tokens are all COMPUTED gets a key:
// the hash chain of (parent block's key, the block's tokens). A prompt walks its full blocks from
// the start and takes every block whose key matches; the walk stops at the first miss. Matching
// compares the parent's identity and the tokens themselves, so a hash collision can never hand out
// the wrong K/V. Partial (last, not full) blocks are never keyed, so never shared, so a sequence
// only ever writes to blocks it owns alone.
//
//   prompt:  [a b c d][e f g h][i j]   tokens_per_block = 4
//   cached:  [a b c d][e f g h]         keys k1 = H(root, abcd), k2 = H(k1, efgh)
//   reuse:   2 blocks, 8 tokens; positions 8..9 are computed.
//   A prompt of exactly [a b c d][e f g h] reuses only block 0: one token must be computed so
//   that the step yields logits.
//
// Out of blocks is a return value (nullopt / false), never an exception, and leaves the state
// unchanged. Not thread-safe: the executor's loop thread owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "inflight/executor.h"
#include "inflight/types.h"

namespace inflight::kv_cache {

using SeqId = IdType;

// A sequence's block use since its AllocatePrompt / first EnsureCapacity. Free forgets it, so the
// scheduler sums it into the Sequence (a paused and resumed sequence counts both allocations).
struct SequenceBlockStats {
  std::int64_t alloc_new_blocks = 0;    // blocks handed out fresh (free or evicted)
  std::int64_t reused_blocks = 0;       // blocks taken from the prefix cache
  std::int64_t alloc_total_blocks = 0;  // new + reused
};

// What AllocatePrompt would reuse for a prompt, without changing anything.
struct PrefixMatch {
  std::int32_t num_blocks = 0;         // leading full blocks that would be reused
  std::int32_t num_blocks_in_use = 0;  // of those, held by other sequences (cost no free block)
};

class BlockManager {
 public:
  // Hash of one chain link; replaceable for tests that force collisions.
  using HashFn = std::uint64_t (*)(std::uint64_t parent_hash, std::span<const TokenIdType> tokens);

  // num_blocks >= 1, tokens_per_block >= 1 (checked by the caller's config validation; asserted
  // here).
  BlockManager(std::int64_t num_blocks, std::int32_t tokens_per_block, bool enable_reuse);

  std::int64_t num_blocks() const { return static_cast<std::int64_t>(blocks_.size()); }
  std::int32_t tokens_per_block() const { return tokens_per_block_; }
  bool reuse_enabled() const { return enable_reuse_; }
  // Blocks needed to hold num_tokens tokens (ceil).
  std::int64_t BlocksForTokens(std::int64_t num_tokens) const;

  // Gives `seq` (which must hold no blocks) blocks for every token of `tokens`, taking the longest
  // cached full-block prefix when reuse is enabled and reuse_prefix is true. Returns the number of
  // reused tokens (a multiple of tokens_per_block, at most ((size - 1) / tokens_per_block) *
  // tokens_per_block): the caller computes tokens[returned ..]. nullopt when the blocks do not fit;
  // then nothing changed.
  std::optional<std::int32_t> AllocatePrompt(SeqId seq, std::span<const TokenIdType> tokens,
                                             bool reuse_prefix = true);
  // What AllocatePrompt(tokens) would reuse now.
  PrefixMatch MatchPrefix(std::span<const TokenIdType> tokens) const;

  // Grows seq's table to hold num_tokens_total tokens (never shrinks). False when the blocks do not
  // fit; then nothing changed. A sequence not known yet starts with an empty table.
  bool EnsureCapacity(SeqId seq, std::int32_t num_tokens_total);

  // Registers seq's blocks that are now full AND computed (all_tokens[0, num_computed)) in the
  // reuse index. all_tokens is the sequence's whole token list (prompt + generated). No-op without
  // reuse.
  void CommitTokens(SeqId seq, std::span<const TokenIdType> all_tokens, std::int32_t num_computed);

  // Releases every block of seq and forgets it. Keyed blocks join the LRU deepest first, so a chain
  // is evicted from its tail (its head serves more prompts). Unknown seq: no-op.
  void Free(SeqId seq);

  bool HasSequence(SeqId seq) const { return seqs_.count(seq) != 0; }
  // Empty for an unknown seq. The reference is valid until the next call that changes seq's table.
  const std::vector<std::int32_t>& BlockTable(SeqId seq) const;
  SequenceBlockStats SequenceStats(SeqId seq) const;

  // Blocks that can be handed out now: free + cached (evictable).
  std::int64_t NumFreeBlocks() const;
  std::int64_t NumCachedBlocks() const { return static_cast<std::int64_t>(lru_.size()); }
  bool CanAllocate(std::int64_t num_blocks) const { return num_blocks <= NumFreeBlocks(); }
  std::int32_t RefCount(std::int32_t block) const { return blocks_.at(block).ref_count; }
  bool IsCached(std::int32_t block) const { return blocks_.at(block).keyed; }
  // Cached blocks in eviction order (next victim first).
  std::vector<std::int32_t> EvictionOrder() const { return {lru_.begin(), lru_.end()}; }

  // Global stats; alloc/reuse counters are cumulative. cache_hit_rate = reused / alloc_total.
  KvCacheStats Stats() const;

  // Empty string when consistent, else a description of the first broken invariant. O(num_blocks +
  // tables).
  std::string CheckInvariants() const;

  // Test hook: replaces the chain hash (e.g. by a constant, to force collisions). Call before any
  // allocation.
  void SetHashFunctionForTesting(HashFn fn) { hash_fn_ = fn; }

 private:
  struct Block {
    std::int32_t ref_count = 0;
    bool keyed = false;
    // Valid when keyed: the chain link this block's K/V stand for.
    std::uint64_t hash = 0;
    std::uint64_t key_id = 0;         // unique per registration, never reused
    std::uint64_t parent_key_id = 0;  // 0 for the first block of a sequence
    std::vector<TokenIdType> tokens;
    std::list<std::int32_t>::iterator lru_pos;  // valid when keyed and ref_count == 0
  };
  // Chain link of one committed full block of a sequence: what its children hash and match against.
  struct Link {
    std::uint64_t hash = 0;
    std::uint64_t key_id = 0;
  };
  struct SeqState {
    std::vector<std::int32_t> table;
    std::vector<Link> chain;  // one per leading full computed block (or reused block)
    SequenceBlockStats stats;
  };

  // The keyed block with this chain link, or -1.
  std::int32_t Lookup(std::uint64_t hash, std::uint64_t parent_key_id,
                      std::span<const TokenIdType> tokens) const;
  std::int32_t TakeFreshBlock();  // precondition: NumFreeBlocks() > 0
  void DropKey(std::int32_t block);
  void Release(std::int32_t block);

  std::int32_t tokens_per_block_;
  bool enable_reuse_;
  HashFn hash_fn_;
  std::vector<Block> blocks_;
  std::deque<std::int32_t> free_;  // ref 0, unkeyed
  std::list<std::int32_t> lru_;    // ref 0, keyed; front = least recently used
  std::unordered_multimap<std::uint64_t, std::int32_t> index_;  // hash -> keyed blocks
  std::unordered_map<SeqId, SeqState> seqs_;
  std::uint64_t next_key_id_ = 1;
  std::int64_t total_alloc_new_ = 0;
  std::int64_t total_reused_ = 0;
};

}  // namespace inflight::kv_cache
