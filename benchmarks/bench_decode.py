"""Greedy decoding at the source articles' sizes: with the key/value cache vs re-running the whole prefix.

Batch 32, source length 10, d_model 512, 8 heads, 6 layers, d_ff 2048, vocabulary 30000 (an untrained
model: speed does not depend on the weights). <eos> can never win (its output bias is -1e4), so both
paths decode every one of the N new tokens; the script checks that they return the same tokens.

1. One step's cost at step t (t = 1, 16, 64, 128, 256): the cached step feeds one token per sentence,
   the recomputing step all t; the output head (30000 words) runs once per step in both.
2. Whole decodes of N = 16 and 64 new tokens, cached and recomputing in interleaved rounds after a
   warm-up round. Add 256 to ``--lengths`` to time that one too (one round: recomputing runs the decoder
   on 1 + 2 + ... + 256 = 32,896 positions per sentence, tens of minutes on a busy machine).
3. The whole-decode ratio at 16, 64 and 256 tokens estimated from the step costs (the sum over steps of
   the interpolated step times), next to the measured ratios. The measured 64-token ratio is printed
   last (target >= 8x).
4. Beam search (beam 4) with vs without the cache: 8 sentences x 4 beams = 32 rows in the batch dim, the
   cache reordered by the surviving beams each step; both must return the same beams (``--beam-tokens``).
5. A GPT (the same sizes, 2 K/V heads, rotary positions) continuing 32 prompts of random lengths 1..32 by
   ``--gpt-tokens``: one left-padded batch vs one prompt at a time vs one batch per prompt length (what a
   generate without left padding needs); the script counts the rows whose tokens equal their prompt's alone.

    .venv/bin/python benchmarks/bench_decode.py [--rounds 2] [--lengths 16 64] [--threads 2] [--beam-tokens 32]
                                                [--gpt-tokens 16]
"""

import argparse
import statistics
import time

import torch

import walkthrough as wt

SOS, EOS = wt.Vocab.sos_id, wt.Vocab.eos_id
TARGET = 8.0


def source_sized_model() -> wt.Transformer:
    torch.manual_seed(0)
    model = wt.Transformer(wt.ModelConfig.paper_base(dropout=0.0)).eval()  # max_len 5000: room for 256 tokens
    with torch.no_grad():
        model.output_head.proj.bias[EOS] = -1e4  # <eos> never wins: every run decodes all N tokens
    return model


def decode_seconds(model, src, new_tokens: int, use_cache: bool) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    ids = wt.greedy_decode(model, src, new_tokens, SOS, EOS, use_cache=use_cache)
    return time.perf_counter() - start, ids


@torch.no_grad()
def step_seconds(model, src, memory, prefix, use_cache: bool, repeats: int = 3) -> float:
    """Median time of decoding step t = prefix.size(1) alone: what greedy_steps does at that step."""
    t = prefix.size(1)
    samples = []
    for _ in range(repeats):
        if use_cache:
            cache = model.new_cache(src)
            if t > 1:
                model.decode(prefix[:, :t - 1], memory, src, cache)  # steps 1..t-1, not timed
            start = time.perf_counter()
            model.output_head(model.decode(prefix[:, t - 1:], memory, src, cache)[:, -1]).softmax(-1).argmax(-1)
        else:
            start = time.perf_counter()
            model.output_head(model.decode(prefix, memory, src)[:, -1]).softmax(-1).argmax(-1)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


@torch.no_grad()
def head_seconds(model, batch: int, repeats: int = 5) -> float:
    h = torch.randn(batch, 512)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        model.output_head(h).softmax(-1).argmax(-1)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def beam_seconds(model, src, new_tokens: int, use_cache: bool, rounds: int) -> tuple[float, torch.Tensor]:
    """Median time of a whole beam search (beam 4) after a warm-up run, and its beams [B, 4, T]."""
    samples = []
    for round_ in range(1 + rounds):
        start = time.perf_counter()
        beams = wt.beam_search(model, src, new_tokens, SOS, EOS, beam_size=4, use_cache=use_cache).ids
        if round_:
            samples.append(time.perf_counter() - start)
    return statistics.median(samples), beams


def prompt_batches(model: wt.GPT, prompts: list[list[int]], new_tokens: int, rounds: int) -> None:
    """Print the three ways to continue prompts of different lengths, timed (median of ``rounds``; the sections
    before warmed the process up)."""
    by_length = {}
    for i, prompt in enumerate(prompts):
        by_length.setdefault(len(prompt), []).append(i)

    def left_padded():
        return wt.greedy_decode(model, wt.left_pad(prompts), new_tokens, eos_id=EOS)  # [32, L_max + N]

    def one_at_a_time():
        return [wt.greedy_decode(model, torch.tensor([p]), new_tokens, eos_id=EOS)[0] for p in prompts]

    def per_length():
        return [wt.greedy_decode(model, torch.tensor([prompts[i] for i in rows]), new_tokens, eos_id=EOS)
                for rows in by_length.values()]

    times, outputs = {}, {}
    for name, run in (("one left-padded batch", left_padded), ("one prompt at a time", one_at_a_time),
                      (f"a batch per length ({len(by_length)})", per_length)):
        samples = []
        for _ in range(rounds):
            start = time.perf_counter()
            outputs[name] = run()
            samples.append(time.perf_counter() - start)
        times[name] = statistics.median(samples)
    batched, width = outputs["one left-padded batch"], max(len(p) for p in prompts)
    same = sum(torch.equal(row[width - len(p):], alone)
               for p, row, alone in zip(prompts, batched, outputs["one prompt at a time"]))
    fastest = times["one left-padded batch"]
    for name, t in times.items():
        print(f"  {name:24} {t:7.2f} s  ({t / fastest:4.1f}x the left-padded batch)")
    print(f"  {same} of {len(prompts)} rows give exactly the tokens of their prompt alone")


def interpolated(samples: dict[int, float], t: int) -> float:
    """A step time at step t from the measured steps around it (linear in between)."""
    known = sorted(samples)
    if t in samples:
        return samples[t]
    upper = next(k for k in known if k > t)
    lower = max(k for k in known if k < t)
    return samples[lower] + (samples[upper] - samples[lower]) * (t - lower) / (upper - lower)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds for lengths up to 64 (longer: 1)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 64], help="whole decodes to time")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--beam-tokens", type=int, default=32, help="new tokens of the beam search timed")
    parser.add_argument("--gpt-tokens", type=int, default=16, help="new tokens per prompt of the GPT timed")
    args = parser.parse_args()
    if args.rounds < 1 or args.threads < 1 or min(args.lengths) < 1 or max(args.lengths) > 256:
        parser.error("--rounds and --threads must be at least 1, --lengths between 1 and 256")
    if not 1 <= args.beam_tokens <= 256 or not 1 <= args.gpt_tokens <= 256:
        parser.error("--beam-tokens and --gpt-tokens must be between 1 and 256")
    torch.set_num_threads(args.threads)
    model = source_sized_model()
    src = torch.randint(4, 30000, (32, 10))  # [B, L_src]
    src[16:, 7:] = wt.Vocab.pad_id  # half the sentences are 7 tokens long
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); batch 32, source 10, d_model 512, "
          f"8 heads, 6 layers, vocab 30000")

    with torch.no_grad():
        memory = model.encode(src)
    prefix = torch.randint(4, 30000, (32, 256))
    head = head_seconds(model, 32)
    print("\none step:")
    print(f"  {'step t':>6} {'cached ms':>10} {'recompute ms':>13} {'ratio':>7}   "
          f"output head alone: {head * 1e3:.1f} ms a step")
    step_times = {True: {}, False: {}}
    for t in (1, 16, 64, 128, 256):
        repeats = 3 if t <= 64 else 1  # a recomputing step at t = 256 is 8192 positions: seconds
        for use_cache in (True, False):
            step_times[use_cache][t] = step_seconds(model, src, memory, prefix[:, :t], use_cache, repeats)
        cached, recomputed = step_times[True][t], step_times[False][t]
        print(f"  {t:>6} {cached * 1e3:>10.1f} {recomputed * 1e3:>13.1f} {recomputed / cached:>6.1f}x   "
              f"(head = {head / cached:.0%} of the cached step)")

    print("\nwhole greedy decode (interleaved rounds after a warm-up round; above 64 tokens one round):")
    ratios = {}
    for new_tokens in args.lengths:
        long_run = new_tokens > 64  # one round, no warm-up: shorter runs warmed up already, and it takes minutes
        rounds, warmup = (1, 0) if long_run else (args.rounds, 1)
        times = {True: [], False: []}
        for round_ in range(warmup + rounds):
            decoded = {}
            for use_cache in (True, False):
                seconds, decoded[use_cache] = decode_seconds(model, src, new_tokens, use_cache)
                if round_ >= warmup:
                    times[use_cache].append(seconds)
            if not torch.equal(decoded[True], decoded[False]) or decoded[True].size(1) != new_tokens + 1:
                raise SystemExit(f"cached and recomputed decoding of {new_tokens} tokens differ: a bug, not a timing")
        cached, recomputed = statistics.median(times[True]), statistics.median(times[False])
        ratios[new_tokens] = recomputed / cached
        print(f"  {new_tokens:>4} tokens: cached {cached:7.2f} s, recomputing {recomputed:8.2f} s, "
              f"ratio {ratios[new_tokens]:5.1f}x  ({rounds} round(s), same tokens)")

    print("\nwhole-decode ratio by length, estimated from the step costs (sum over steps; no encoder):")
    for new_tokens in (16, 64, 256):
        steps = range(1, new_tokens + 1)
        estimate = (sum(interpolated(step_times[False], t) for t in steps)
                    / sum(interpolated(step_times[True], t) for t in steps))
        measured = f", measured {ratios[new_tokens]:.1f}x" if new_tokens in ratios else ""
        print(f"  {new_tokens:>4} tokens: estimated {estimate:5.1f}x{measured}")
    print("recomputing does t positions at step t, the cache one: the gain grows with the length, held back by "
          "the output head, which costs the same in both")
    print(f"\nbeam search, beam 4, 8 sentences (32 rows in the batch dim), {args.beam_tokens} new tokens "
          f"(median of {args.rounds} after a warm-up):")
    beam_src = src[:8]  # [8, L_src] -> [8·4, ...] inside beam_search
    beam_times, beams = {}, {}
    for use_cache in (True, False):
        beam_times[use_cache], beams[use_cache] = beam_seconds(model, beam_src, args.beam_tokens, use_cache,
                                                               args.rounds)
    if not torch.equal(beams[True], beams[False]):
        raise SystemExit("beam search with and without the cache returned different beams: a bug, not a timing")
    print(f"  cached {beam_times[True]:7.2f} s, recomputing {beam_times[False]:8.2f} s, ratio "
          f"{beam_times[False] / beam_times[True]:5.1f}x (same beams; the cache reordered by index_select each step)")
    print(f"\nGPT, 32 prompts of random lengths 1..32, {args.gpt_tokens} new tokens each (median of "
          f"{args.rounds}):")
    torch.manual_seed(0)
    gpt = wt.GPT(wt.GPTConfig(vocab_size=30000, d_model=512, num_heads=8, num_kv_heads=2, d_ff=2048, num_layers=6,
                              max_len=512, dropout=0.0)).eval()
    with torch.no_grad():
        gpt.output_head.proj.bias[EOS] = -1e4  # every prompt runs all its tokens
    lengths = torch.randint(1, 33, (32,), generator=torch.Generator().manual_seed(0))  # some lengths repeat
    prompts = [torch.randint(4, 30000, (int(n),)).tolist() for n in lengths]
    prompt_batches(gpt, prompts, args.gpt_tokens, args.rounds)
    if 64 in ratios:
        verdict = "meets" if ratios[64] >= TARGET else "misses"
        print(f"ratio cached vs recomputing at 64 tokens: {ratios[64]:.1f}x ({verdict} the target {TARGET:.0f}x)")


if __name__ == "__main__":
    main()
