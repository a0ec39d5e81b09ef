"""What a class sees and does: figures, explorers, shape questions, exercises and the check of a whole model.

May import: everything below it (the flat modules, model/, interop/, trace/, text/, tasks/)."""
