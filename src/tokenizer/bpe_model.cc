#include "tokenizer/bpe_model.h"

#include <queue>

#include "common/utf8.h"

namespace inflight::tokenizer {

Result<std::unique_ptr<BpeModel>> BpeModel::Create(
    Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
    const std::string& source) {
  std::unique_ptr<BpeModel> model(new BpeModel());
  model->vocab_ = std::move(vocab);
  model->options_ = options;
  int32_t max_id = -1;
  for (const auto& [token, id] : model->vocab_) {
    if (id < 0) {
      return InvalidArgument(source + ": token \"" + token + "\" has id " + std::to_string(id) +
                             "; ids must be >= 0");
    }
    max_id = std::max(max_id, id);
  }
  model->id_to_token_.assign(static_cast<size_t>(max_id) + 1, nullptr);
  for (const auto& [token, id] : model->vocab_) {
    const std::string*& slot = model->id_to_token_[static_cast<size_t>(id)];
    if (slot != nullptr) {
      return InvalidArgument(source + ": id " + std::to_string(id) + " is given to both \"" +
                             *slot + "\" and \"" + token + "\"; each id must name one token");
    }
    slot = &token;
  }
  model->merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const std::string merged = left + right;
    const std::string* missing = nullptr;
    auto l = model->vocab_.find(left), r = model->vocab_.find(right),
         m = model->vocab_.find(merged);
    if (l == model->vocab_.end())
      missing = &left;
    else if (r == model->vocab_.end())
      missing = &right;
    else if (m == model->vocab_.end())
      missing = &merged;
    if (missing != nullptr) {
      return InvalidArgument(source + ": merge " + std::to_string(rank) + " (\"" + left + "\" \"" +
                             right + "\") uses \"" + *missing +
                             "\", which is not in the vocabulary");
    }
    // A repeated merge keeps its first (best) rank, as the tokenizers library does.
    model->merges_.try_emplace(PairKey(l->second, r->second),
                               Merge{static_cast<int32_t>(rank), m->second});
  }
  return model;
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || id >= id_end()) return nullptr;
  return id_to_token_[static_cast<size_t>(id)];
}

Status BpeModel::Encode(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.empty()) return Status::Ok();
  if (options_.ignore_merges) {
    if (auto id = TokenToId(piece)) {
      ids->push_back(*id);
      return Status::Ok();
    }
  }
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(piece);
    if (it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return Status::Ok();
    }
  }
  std::vector<int32_t> piece_ids;
  RETURN_IF_ERROR(MergePiece(piece, &piece_ids));
  ids->insert(ids->end(), piece_ids.begin(), piece_ids.end());
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::string(piece), std::move(piece_ids));
  return Status::Ok();
}

// Merges the lowest-ranked adjacent pair until none is in the merge table; among equal ranks the
// leftmost goes first. Symbols form a linked list so each merge is O(log n), which matters for
// long pieces such as runs of spaces.
Status BpeModel::MergePiece(std::string_view piece, std::vector<int32_t>* ids) const {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  std::vector<Symbol> symbols;
  size_t pos = 0;
  while (pos < piece.size()) {
    size_t len = Utf8SequenceLength(piece, pos);
    if (len == 0) len = 1;  // cannot happen for byte-level text; keep going byte by byte
    auto id = TokenToId(piece.substr(pos, len));
    if (!id) id = options_.unk_id;
    if (!id) {
      return InvalidArgument("character \"" + std::string(piece.substr(pos, len)) +
                             "\" is not in the vocabulary and the model has no unk_token");
    }
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({*id, index - 1, index + 1});
    pos += len;
  }
  symbols.back().next = -1;

  struct Candidate {
    int32_t rank;
    int32_t left;  // index of the left symbol
    int32_t left_id;
    int32_t right_id;
    int32_t merged_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto push_pair = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    auto it = merges_.find(PairKey(symbols[left].id, symbols[right].id));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, symbols[left].id, symbols[right].id, it->second.merged_id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push_pair(i);

  constexpr int32_t kDead = -2;
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    // Stale entries: the left symbol was merged away or changed, or its neighbour changed.
    if (left.prev == kDead || left.id != c.left_id || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    if (right.id != c.right_id) continue;
    left.id = c.merged_id;
    const int32_t after = right.next;
    right.prev = kDead;
    left.next = after;
    if (after >= 0) symbols[after].prev = c.left;
    push_pair(left.prev);
    push_pair(c.left);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) ids->push_back(symbols[i].id);
  return Status::Ok();
}

}  // namespace inflight::tokenizer
