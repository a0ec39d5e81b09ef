"""Real text: the CC-CEDICT phrases, the Tatoeba sentences, and byte-pair encoding from text to ids.

May import: the flat modules only."""
