"""Layer 8, integrations: other engines. verl launch export and reward functions (`verl`,
`verl_reward`) and the import of verl / TRL logs into ledgers and reports (`importers`)."""
