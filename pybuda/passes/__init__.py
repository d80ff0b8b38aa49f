"""Graph passes, one module each. A pass takes a Graph and returns (or edits) a Graph."""
