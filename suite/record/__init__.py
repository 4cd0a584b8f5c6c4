"""Layer 2, record: what a run left behind. The per-step ledger (`ledger`), the run spec and
the report v1 built from a ledger, read and changed through one typed API (`report`), and the
JSON Schemas those files follow (`schemas`)."""
