"""Stage 5, judging: a backend's result against the reference under the spec's comparison rules,
and the per-backend expectation files that explain known divergences."""
