"""Layer 5, evaluate: scoring saved adapters through lm-eval (pass@1, a common process judge,
the native reward) with their evaluation compute beside the training budget."""
