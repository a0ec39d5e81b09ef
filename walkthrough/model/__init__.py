"""The model a student reads: sizes, masks, embeddings, attention, layers, the encoder-decoder, the GPT, decoding.

May import: the flat modules beside it (i18n, checks, steps, recording), nothing else of the package. A newcomer
reads it in this order: config, masks, embedding, attention, layers, transformer, gpt, decoding; then what they
lean on: cache, rope, loss, memory_guard, and the two written out by hand, flash and backward."""
