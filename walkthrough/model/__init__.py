"""The model a student reads: sizes, masks, embeddings, attention, layers, the encoder-decoder, the GPT, decoding.

May import: the flat modules beside it (i18n, checks, steps, recording), nothing else of the package."""
