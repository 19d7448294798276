"""Every statement that reads contexts for a search, and the ranking of what they find (docs/retrieval.md)."""
