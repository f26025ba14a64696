"""Stage 2, the model of what runs: descriptors and cases, buffer layouts, the validator, the
well-formedness check, and the backend contract every backend implements."""
