"""Layer 4, train: one GRPO cell. Cell specs (`cell`), running one with TRL's GRPOTrainer
(`run`) and the ledger callback it runs with (`trl_callback`, the public TRL integration),
reward systems (`rewards`), process reward models (`prm`), data sets (`datasets`) and the
embedded arithmetic task (`arith`)."""
