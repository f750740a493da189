"""The signals and the leadership dashboard: selectors (computation), rollups (stored
monthly figures), figures (pure Plotly builders) and csv (exports)."""
