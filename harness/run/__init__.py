"""Stage 6, running: one case on one backend (run_case), the backend registry, result records,
the run's plan and completion markers, option checks, Hypothesis profiles, memory tuning."""
