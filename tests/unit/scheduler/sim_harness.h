// A fake model over a fake paged KV cache, and a loop that drives the scheduler the way the
// executor does.
//
// The fake "K/V" of position p is a hash of the whole token prefix [0, p]. Each step the model
// checks that every cached position it is told about holds the K/V of the sequence's true prefix (a
// wrong block table, a stale reused block or a lost write shows up here), then writes the new
// positions and "samples" the next token from the last hash. So generated tokens depend on the
// cache being right, and a run under a tiny pool (pauses, recomputes, evictions) must give the same
// tokens as the direct computation.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "executor/scheduler.h"
#include "executor/sequence.h"
#include "kv_cache/block_manager.h"
#include "model/model_runner.h"

namespace inflight::executor::sim {

constexpr TokenIdType kVocab = 50;
constexpr std::uint64_t kEmptyPrefix = 0x1234;

inline std::uint64_t MixKv(std::uint64_t h, TokenIdType token) {
  h ^= static_cast<std::uint64_t>(token) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

inline TokenIdType TokenFromKv(std::uint64_t h) {
  return static_cast<TokenIdType>(h % kVocab);
}

// What the model would generate for this prompt without any scheduler: the expected output.
inline VecTokens ReferenceGenerate(const VecTokens& prompt, SizeType max_new,
                                   std::optional<TokenIdType> end_id) {
  std::uint64_t h = kEmptyPrefix;
  for (TokenIdType t : prompt) h = MixKv(h, t);
  VecTokens out;
  while (static_cast<SizeType>(out.size()) < max_new) {
    const TokenIdType next = TokenFromKv(h);
    out.push_back(next);
    if (end_id && next == *end_id) break;
    h = MixKv(h, next);
  }
  return out;
}

class FakeKvModel {
 public:
  // all_tokens(seq_id) returns the sequence's true tokens, to check what the cache holds.
  FakeKvModel(std::int64_t num_blocks, std::int32_t tokens_per_block,
              std::function<const VecTokens&(std::int64_t)> all_tokens)
      : tpb_(tokens_per_block),
        slots_(static_cast<std::size_t>(num_blocks * tokens_per_block), kPoison),
        all_tokens_(std::move(all_tokens)) {}

  // One forward step: returns, per sequence, the token sampled from its last computed position.
  std::vector<TokenIdType> Step(const model::StepInput& input) {
    std::vector<TokenIdType> next;
    std::set<std::size_t> written;
    for (const model::SequenceStep& s : input.sequences) {
      const VecTokens& truth = all_tokens_(s.seq_id);
      const std::int64_t end = s.num_cached + static_cast<std::int64_t>(s.tokens.size());
      EXPECT_EQ(static_cast<std::int64_t>(s.block_table.size()), (end + tpb_ - 1) / tpb_)
          << "seq " << s.seq_id << " table does not cover exactly [0, " << end << ")";
      std::uint64_t h = kEmptyPrefix;
      for (std::int64_t p = 0; p < s.num_cached; ++p) {
        h = MixKv(h, truth.at(static_cast<std::size_t>(p)));
        const std::uint64_t cached = slots_[Slot(s, p)];
        if (cached != h && ++num_errors_ <= 5) {
          ADD_FAILURE() << "seq " << s.seq_id << " position " << p << " (block "
                        << s.block_table[p / tpb_] << "): cached K/V "
                        << (cached == kPoison ? std::string("never written")
                                              : std::string("stale"));
        }
      }
      for (std::size_t j = 0; j < s.tokens.size(); ++j) {
        const std::int64_t p = s.num_cached + static_cast<std::int64_t>(j);
        EXPECT_EQ(s.tokens[j], truth.at(static_cast<std::size_t>(p)))
            << "seq " << s.seq_id << " pos " << p;
        h = MixKv(h, s.tokens[j]);
        const std::size_t slot = Slot(s, p);
        EXPECT_TRUE(written.insert(slot).second)
            << "two sequences write slot " << slot << " in one step";
        slots_[slot] = h;
      }
      next.push_back(TokenFromKv(h));
    }
    return next;
  }

 private:
  static constexpr std::uint64_t kPoison = ~0ull;
  std::size_t Slot(const model::SequenceStep& s, std::int64_t pos) const {
    return static_cast<std::size_t>(s.block_table.at(static_cast<std::size_t>(pos / tpb_))) * tpb_ +
           static_cast<std::size_t>(pos % tpb_);
  }
  std::int32_t tpb_;
  std::vector<std::uint64_t> slots_;
  std::function<const VecTokens&(std::int64_t)> all_tokens_;
  int num_errors_ = 0;
};

struct SimRequest {
  VecTokens prompt;
  SizeType max_new_tokens = 1;
  int arrival_step = 0;
  std::optional<TokenIdType> end_id;
};

struct SimSetup {
  SchedulerConfig config;
  BatchingType batching = BatchingType::kInflight;
  SchedulerLimits limits;
  std::int64_t num_blocks = 64;
  bool enable_reuse = true;
};

// One scheduled item, kept after the run (the Sequence objects are gone by then).
struct ItemRecord {
  IdType id = 0;
  SizeType num_cached = 0;
  SizeType num_tokens = 0;
  bool needs_sampling = false;
};
struct StepRecord {
  std::vector<ItemRecord> items;
  std::vector<IdType> paused;
  ScheduleStats stats;
};

// What every simulated loop keeps of its end (CollectEnd).
struct SimEnd {
  std::vector<VecTokens> generated;  // per request, in request order
  std::int64_t free_blocks_at_end = -1;
};

struct SimOutcome : SimEnd {
  std::vector<SequenceKvStats> kv_stats;
  std::vector<StepRecord> steps;  // one per Schedule() call
  std::int64_t num_pauses = 0;
  std::int64_t num_computed_tokens = 0;
  // Max over steps of the blocks the running sequences need at prompt + max_new_tokens (no
  // sharing).
  std::int64_t max_promised_blocks = 0;
};

// n requests of random prompts (1..max_prompt tokens) and lengths (1..max_new), a third with end
// id 3.
inline std::vector<SimRequest> RandomRequests(std::uint32_t seed, int n, int max_prompt,
                                              int max_new) {
  std::mt19937 rng(seed);
  std::vector<SimRequest> out;
  for (int i = 0; i < n; ++i) {
    SimRequest r;
    const int len = 1 + static_cast<int>(rng() % static_cast<std::uint32_t>(max_prompt));
    for (int j = 0; j < len; ++j) r.prompt.push_back(static_cast<TokenIdType>(rng() % kVocab));
    r.max_new_tokens = 1 + static_cast<SizeType>(rng() % static_cast<std::uint32_t>(max_new));
    if (rng() % 3 == 0) r.end_id = 3;
    out.push_back(std::move(r));
  }
  return out;
}

// What every simulated run starts from: the pool, the scheduler over it, one sequence per request
// (ids from 1; enqueued at once when `enqueue`) and the model that checks the cache against their
// tokens. Not movable: the model reads the sequences through `this`.
struct SimRig {
  SimRig(const SimSetup& setup, const std::vector<SimRequest>& requests, bool enqueue)
      : bm(setup.num_blocks, setup.limits.tokens_per_block, setup.enable_reuse),
        sched(setup.config, setup.batching, setup.limits, bm),
        model(setup.num_blocks, setup.limits.tokens_per_block,
              [this](std::int64_t id) -> const VecTokens& { return seqs.at(id - 1)->tokens; }) {
    for (std::size_t i = 0; i < requests.size(); ++i) {
      seqs.push_back(std::make_unique<Sequence>(static_cast<IdType>(i + 1), requests[i].prompt,
                                                requests[i].max_new_tokens));
      if (enqueue) sched.Enqueue(seqs.back().get());
    }
  }
  SimRig(const SimRig&) = delete;
  SimRig& operator=(const SimRig&) = delete;

  kv_cache::BlockManager bm;
  Scheduler sched;
  std::vector<std::unique_ptr<Sequence>> seqs;
  FakeKvModel model;
};

// The end every simulated loop checks: the scheduler idle, each sequence finished and out of
// flight, the pool consistent. Keeps the generated tokens and the free blocks.
inline void CollectEnd(const SimRig& rig, SimEnd& out) {
  for (const auto& seq : rig.seqs) {
    EXPECT_EQ(seq->state, SequenceState::kFinished) << "sequence " << seq->id;
    out.generated.emplace_back(seq->generated().begin(), seq->generated().end());
  }
  EXPECT_FALSE(rig.sched.HasWork());
  EXPECT_EQ(rig.sched.num_in_flight(), 0);
  EXPECT_EQ(rig.bm.CheckInvariants(), "");
  out.free_blocks_at_end = rig.bm.NumFreeBlocks();
}

// Chunked context, steps of at most 24 tokens, sequences of at most 64 in blocks of 4 tokens:
// prompts outgrow a step and pools of a few dozen blocks run out.
inline SimSetup ChunkedSetup(CapacitySchedulerPolicy policy, SizeType max_batch,
                             std::int64_t blocks, SizeType micro_batches, bool reuse) {
  SimSetup s;
  s.config.policy = policy;
  s.config.enable_chunked_context = true;
  s.limits = {max_batch, 24, 64, 4, micro_batches};
  s.num_blocks = blocks;
  s.enable_reuse = reuse;
  return s;
}

// Drives Schedule / BuildStepInput / model / OnStepComputed / sample / Finish until every request
// is done.
inline SimOutcome RunSim(const SimSetup& setup, const std::vector<SimRequest>& requests) {
  SimOutcome out;
  SimRig rig(setup, requests, /*enqueue=*/false);
  auto& [bm, sched, seqs, model] = rig;
  int last_arrival = 0;
  for (const SimRequest& r : requests) last_arrival = std::max(last_arrival, r.arrival_step);

  std::size_t num_finished = 0;
  for (int step = 0; num_finished < seqs.size(); ++step) {
    if (step > 20000) {
      ADD_FAILURE() << "no progress after " << step << " steps";
      break;
    }
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (requests[i].arrival_step != step) continue;
      const Status fits = sched.CheckFits(seqs[i]->prompt_len, seqs[i]->max_new_tokens);
      EXPECT_TRUE(fits.ok()) << fits.message();
      sched.Enqueue(seqs[i].get());
    }
    ScheduleResult r = sched.Schedule();
    EXPECT_LE(static_cast<SizeType>(r.items.size()), setup.limits.max_batch_size);
    EXPECT_LE(r.num_tokens(), setup.limits.max_num_tokens);
    EXPECT_LE(sched.num_running(), setup.limits.max_batch_size);
    std::set<const Sequence*> unique;
    for (const ScheduledItem& item : r.items) {
      EXPECT_TRUE(unique.insert(item.seq).second)
          << "sequence " << item.seq->id << " twice in a step";
      EXPECT_GE(item.num_tokens, 1);
      EXPECT_EQ(item.num_cached, item.seq->num_computed_tokens);
      EXPECT_EQ(item.seq->state, SequenceState::kRunning);
    }
    std::int64_t promised = 0;
    for (const auto& seq : seqs) {
      if (seq->state == SequenceState::kRunning) {
        promised +=
            bm.BlocksForTokens(static_cast<std::int64_t>(seq->prompt_len) + seq->max_new_tokens);
      }
    }
    out.max_promised_blocks = std::max(out.max_promised_blocks, promised);
    const std::string broken = bm.CheckInvariants();
    EXPECT_EQ(broken, "") << "step " << step;
    out.num_pauses += static_cast<std::int64_t>(r.paused.size());
    if (r.empty() && step > last_arrival) {
      ADD_FAILURE() << "step " << step << " scheduled nothing with " << sched.num_waiting()
                    << " waiting, " << sched.num_paused() << " paused, " << sched.num_running()
                    << " running";
      break;
    }
    if (!broken.empty()) break;
    const model::StepInput input = sched.BuildStepInput(r);
    const std::vector<TokenIdType> next = model.Step(input);
    sched.OnStepComputed(r);
    out.num_computed_tokens += r.num_tokens();
    for (std::size_t i = 0; i < r.items.size(); ++i) {
      Sequence* seq = r.items[i].seq;
      EXPECT_EQ(seq->num_computed_tokens, r.items[i].num_cached + r.items[i].num_tokens);
      if (!r.items[i].needs_sampling) continue;
      seq->AppendToken(next[i]);
      const SimRequest& req = requests[seq->id - 1];
      if (seq->ReachedMaxTokens() || (req.end_id && next[i] == *req.end_id)) {
        sched.Finish(seq);
        ++num_finished;
      }
    }
    StepRecord rec;
    for (const ScheduledItem& item : r.items) {
      rec.items.push_back({item.seq->id, item.num_cached, item.num_tokens, item.needs_sampling});
    }
    for (const Sequence* p : r.paused) rec.paused.push_back(p->id);
    rec.stats = r.stats;
    out.steps.push_back(std::move(rec));
  }
  for (const auto& seq : seqs) out.kv_stats.push_back(seq->kv_stats);
  CollectEnd(rig, out);
  return out;
}

}  // namespace inflight::executor::sim
