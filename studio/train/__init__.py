"""The Train tab: the form, the dataset check, the memory estimate and Start."""
