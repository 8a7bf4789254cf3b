"""The runtime behind ``flowtui``'s public API: one module per idea (see the README's layout).

Flows import from ``flowtui``, not from here. Nothing in this package imports
textual, rich or litellm at import time.
"""
