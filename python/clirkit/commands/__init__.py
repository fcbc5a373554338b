"""CLI command groups; each module defines ``register(top, groups)``."""
