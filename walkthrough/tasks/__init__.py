"""What the models learn: vocabularies, the training loop, checkpoints, the numerals, the GPT, the translator.

May import: the flat modules, model/ and text/ (never trace/: learning sits beside the tools)."""
