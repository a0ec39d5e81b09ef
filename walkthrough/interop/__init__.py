"""Real models read into ours: PyTorch's nn.MultiheadAttention and nn.Transformer, Hugging Face's transformers.

May import: the flat modules and model/."""
