"""Random numbers (Philox): being written. Registers its ops into ``ops.OPS``."""
