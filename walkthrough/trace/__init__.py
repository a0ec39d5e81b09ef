"""The tools that run the model to show it: shapes on the meta device, tables of them, costs, memory, gradients.

May import: the flat modules and model/ (never tasks/ or text/: the tools sit beside learning)."""
