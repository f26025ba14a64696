"""Stage 4, the reference: the spec formula evaluated exactly for a case (memoised per case),
and the prefetch that computes it while a backend runs."""
