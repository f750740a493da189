"""The signals and the leadership dashboard: selectors (the computation, and the reads of
stored figures), rollups (stored monthly figures), figures (pure Plotly builders) and csv
(exports)."""
