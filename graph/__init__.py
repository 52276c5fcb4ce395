"""State, wiring, runs and the command-line interface."""
