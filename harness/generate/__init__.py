"""Stage 3, generation: Hypothesis strategies for valid and invalid cases built from the specs,
input values, exhaustive sweeps, and cases from worked examples."""
