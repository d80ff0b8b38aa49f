"""Graph passes, one module each. A pass takes a Graph and returns (or edits) a Graph; local rewrites are
patterns plus a function, applied by the driver of `rewrite.py`."""
